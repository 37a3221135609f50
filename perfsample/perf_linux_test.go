//go:build linux

package perfsample

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// fakeRing is a ring in ordinary memory, laid out as the kernel's: a
// record can wrap around the end.
func fakeRing(size int) *ring {
	return &ring{page: &unix.PerfEventMmapPage{}, data: make([]byte, size)}
}

// put writes rec at the ring's head, wrapping, and advances the head.
func (r *ring) put(rec []byte) {
	size := uint64(len(r.data))
	for i, b := range rec {
		r.data[(r.page.Data_head+uint64(i))%size] = b
	}
	r.page.Data_head += uint64(len(rec))
}

// Draining reads every record in order, a record that wraps around the
// ring's end included, frees the room, and allocates nothing per sample.
func TestDrainWrapsAndDoesNotAllocate(t *testing.T) {
	s := &Set{scratch: make([]byte, 1<<16)}
	r := fakeRing(1024)
	rec := encode(7, 8, perfOrder(), regsABI64, []byte("0123456789abcdef"), 320, 16) // 528 bytes
	var got []int
	fn := func(smp *Sample) {
		got = append(got, smp.TID)
		if string(smp.Stack) != "0123456789abcdef" || smp.Regs[arch.UserRIP] != 1008 {
			t.Errorf("sample %d: stack %q, ip %d", len(got), smp.Stack, smp.Regs[arch.UserRIP])
		}
	}
	for round := 0; round < 5; round++ { // the second record of a round wraps every other round
		r.put(rec)
		s.drain(r, fn)
	}
	if len(got) != 5 || r.page.Data_tail != r.page.Data_head || s.Bad != 0 {
		t.Fatalf("%d samples, tail %d head %d, %d bad", len(got), r.page.Data_tail, r.page.Data_head, s.Bad)
	}
	// A lost record counts, a size past the head is dropped whole.
	lost := make([]byte, 24)
	binary.LittleEndian.PutUint32(lost, recordLost)
	binary.LittleEndian.PutUint16(lost[6:], 24)
	binary.LittleEndian.PutUint64(lost[16:], 3)
	r.put(lost)
	s.drain(r, fn)
	bad := append([]byte(nil), rec[:64]...) // says 528 bytes, has 64
	r.put(bad)
	s.drain(r, fn)
	if s.Lost != 3 || s.Bad != 1 || len(got) != 5 || r.page.Data_tail != r.page.Data_head {
		t.Errorf("lost %d bad %d samples %d tail %d head %d", s.Lost, s.Bad, len(got), r.page.Data_tail, r.page.Data_head)
	}
	got = got[:0:cap(got)]
	nop := func(*Sample) {}
	if n := testing.AllocsPerRun(100, func() { r.put(rec); s.drain(r, nop) }); n != 0 {
		t.Errorf("%v allocations per sample drained", n)
	}
}
