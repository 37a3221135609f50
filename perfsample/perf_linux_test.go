//go:build linux

package perfsample

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"stackshot/internal/arch"
	"stackshot/internal/testutil"
	"stackshot/procmaps"
)

func tids(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// A busy thread's samples carry its registers and the top of its stack:
// the IP lies in the target's code, the stack copy starts at SP in its
// stack mapping and holds a return address into the code.
func TestSamplesOfABusyThread(t *testing.T) {
	if err := Probe(Config{Freq: 99}); err != nil {
		testutil.Skip(t, "perf events refused here: "+err.Error())
	}
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "hot.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin)
	set, err := Open(tg.PID, tids(t, tg.PID), Config{Freq: 199})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if set.Threads() != 2 {
		t.Fatalf("%d events open, want 2 (main, worker)", set.Threads())
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", tg.PID))
	if err != nil {
		t.Fatal(err)
	}
	maps, err := procmaps.ParseMaps(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	find := func(addr uint64) *procmaps.Mapping {
		m, _ := procmaps.Maps(maps).Find(addr)
		return m
	}
	var n int
	byTID := map[int]int{}
	for end := time.Now().Add(20 * time.Second); n < 20 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
		set.Read(func(s *Sample) {
			n++
			byTID[s.TID]++
			if s.PID != tg.PID || !s.HasRegs {
				t.Errorf("sample of pid %d (regs %v), want pid %d with registers", s.PID, s.HasRegs, tg.PID)
				return
			}
			ip, sp := s.Regs[arch.UserRIP], s.Regs[arch.UserRSP]
			if m := find(ip); m == nil || !m.Executable() {
				t.Errorf("IP %#x is not in the target's code", ip)
			}
			if m := find(sp); m == nil || !m.Writable() {
				t.Errorf("SP %#x is not in a writable mapping", sp)
			}
			if len(s.Stack) == 0 || len(s.Stack) > DefaultStackBytes {
				t.Errorf("stack copy of %d bytes, want 1 to %d", len(s.Stack), DefaultStackBytes)
			}
			code := 0
			for i := 0; i+8 <= len(s.Stack); i += 8 {
				if m := find(binary.LittleEndian.Uint64(s.Stack[i:])); m != nil && m.Executable() {
					code++
				}
			}
			if code == 0 {
				t.Errorf("no word of the %d-byte stack copy points into code", len(s.Stack))
			}
		})
	}
	if n < 20 {
		t.Fatalf("%d samples in 20s of a busy thread", n)
	}
	if byTID[tg.PID] != 0 {
		t.Errorf("%d samples of the main thread, blocked in read", byTID[tg.PID])
	}
	// A thread no longer listed has its event closed.
	set.Sync([]int{tg.PID})
	if set.Threads() != 1 {
		t.Errorf("%d events open after Sync to the main thread alone", set.Threads())
	}
}

// A process that does not exist cannot be opened; it is not a refusal.
func TestOpenGone(t *testing.T) {
	if err := Probe(Config{Freq: 99}); err != nil {
		testutil.Skip(t, "perf events refused here: "+err.Error())
	}
	_, err := Open(1<<22+1, []int{1<<22 + 1}, Config{Freq: 99})
	if err == nil {
		t.Fatal("opened a thread that does not exist")
	}
	if _, refused := err.(*RefusedError); refused {
		t.Errorf("a missing thread reads as refused: %v", err)
	}
}
