//go:build linux

package testutil

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// CPUMasks is the CPU mask of each thread of process pid.
func CPUMasks(t testing.TB, pid int) map[int]unix.CPUSet {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]unix.CPUSet{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		var set unix.CPUSet
		if unix.SchedGetaffinity(tid, &set) == nil {
			out[tid] = set
		}
	}
	return out
}

// BusyCPU is the highest CPU the calling thread may run on, skipping the
// test (with why) when it may run on only one: what keeps off a busy CPU
// needs another.
func BusyCPU(t testing.TB) (cpu int, allowed unix.CPUSet) {
	t.Helper()
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	if allowed.Count() < 2 {
		Skip(t, "one CPU allowed: nowhere else to keep off to")
	}
	for c := len(allowed)*64 - 1; c >= 0; c-- {
		if allowed.IsSet(c) {
			return c, allowed
		}
	}
	return -1, allowed
}

// PinRunning pins the thread of process pid named comm to cpu and waits
// until /proc shows it running there; it returns the thread's id.
func PinRunning(t testing.TB, pid int, comm string, cpu int) int {
	t.Helper()
	tid := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, e := range ents {
			id, _ := strconv.Atoi(e.Name())
			name, f := taskStat(pid, id)
			if name != comm {
				continue
			}
			if tid == 0 {
				tid = id
				var one unix.CPUSet
				one.Set(cpu)
				if err := unix.SchedSetaffinity(tid, &one); err != nil {
					t.Fatal(err)
				}
			}
			// Fields after the name: state is the 1st, the last CPU the 37th.
			if len(f) > 36 && f[0] == "R" && f[36] == strconv.Itoa(cpu) {
				return tid
			}
		}
	}
	t.Fatalf("thread %s of %d did not run on CPU %d", comm, pid, cpu)
	return 0
}

// ProcessCPU is the CPU time all of pid's threads have had so far (their
// schedstat), 0 for a process that is gone.
func ProcessCPU(pid int) time.Duration {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var ns uint64
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			ns += cpuNS(pid, tid)
		}
	}
	return time.Duration(ns)
}

// WallFor is how long to record pid for its threads to have about cpu of
// CPU time between them, at the rate they ran over a probe of 300 ms: a
// loaded machine gives a spinning target less of a CPU, and a recording
// of fixed length then fewer samples. Within [least, most], in tenths of
// a second (a -d value).
func WallFor(pid int, cpu, least, most time.Duration) time.Duration {
	c0, t0 := ProcessCPU(pid), time.Now()
	time.Sleep(300 * time.Millisecond)
	d := most
	if rate := float64(ProcessCPU(pid)-c0) / float64(time.Since(t0)); rate > 0 {
		d = time.Duration(float64(cpu) / rate)
	}
	return min(max(d, least), most).Round(100 * time.Millisecond)
}
