//go:build linux

package ptrace

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"stackshot/internal/testutil"
)

// A capture that stops a running thread moves every stackshot thread off
// that thread's CPU (and keeps it off), in each mode that stops; a capture
// with no running thread lets them back on every CPU they started with.
func TestCaptureKeepsOffBusyCPUs(t *testing.T) {
	busy, started := testutil.BusyCPU(t)
	quiet := startBlocked(t)
	for _, tc := range []struct {
		name string
		opt  Options
	}{
		{"auto", Options{Mode: ModeAuto}},
		{"stop", Options{Mode: ModeStop}},
		{"consistent", Options{Mode: ModeStop, Consistent: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startBlocked(t, "spin")
			testutil.PinRunning(t, tg.PID, "spinner", busy)
			p, err := Capture(tg.PID, tc.opt, nil)
			if err != nil {
				t.Fatal(err)
			}
			if th := byName(p)["spinner"]; th == nil || th.Method != MethodPtrace {
				t.Fatalf("the spinner was not stopped: %+v", th)
			}
			for tid, set := range testutil.CPUMasks(t, os.Getpid()) {
				if set.IsSet(busy) || set.Count() != started.Count()-1 {
					t.Errorf("thread %d: %d CPUs, CPU %d in its mask: %v; want every CPU but %d", tid, set.Count(), busy, set.IsSet(busy), busy)
				}
			}
			// A thread born now inherits the mask.
			born := make(chan unix.CPUSet)
			go func() {
				var set unix.CPUSet
				unix.SchedGetaffinity(0, &set)
				born <- set
			}()
			if set := <-born; set.IsSet(busy) {
				t.Errorf("a goroutine's thread has CPU %d in its mask", busy)
			}
			if _, err := Capture(quiet.PID, tc.opt, nil); err != nil {
				t.Fatal(err)
			}
			for tid, set := range testutil.CPUMasks(t, os.Getpid()) {
				if set != started {
					t.Errorf("after a capture with no running thread, thread %d has %d CPUs, want the %d it started with", tid, set.Count(), started.Count())
				}
			}
		})
	}
}

// Gather puts every thread of the process on the caller's CPU, and its
// restore gives them back the mask they had; Settled gives a companion
// that put its own masks back (after a Gather of its own) the mask
// stackshot's threads have now, which it may have changed meanwhile.
func TestGatherAndSettled(t *testing.T) {
	var started unix.CPUSet
	if err := unix.SchedGetaffinity(0, &started); err != nil || started.Count() < 2 {
		t.Skipf("needs two CPUs (%d, %v)", started.Count(), err)
	}
	restore := Gather()
	cpus := map[int]bool{}
	for tid, set := range testutil.CPUMasks(t, os.Getpid()) {
		if set.Count() != 1 {
			t.Errorf("gathered, thread %d may run on %d CPUs", tid, set.Count())
		}
		for cpu := range len(set) * 64 {
			if set.IsSet(cpu) {
				cpus[cpu] = true
			}
		}
	}
	restore()
	if len(cpus) != 1 {
		t.Errorf("gathered on CPUs %v, want one", cpus)
	}
	for tid, set := range testutil.CPUMasks(t, os.Getpid()) {
		if set != started {
			t.Errorf("restored, thread %d has %d CPUs, want the %d it had", tid, set.Count(), started.Count())
		}
	}

	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	release := Companion(cmd.Process.Pid)
	defer release()
	var busy unix.CPUSet
	busy.Set(firstCPU(started))
	keepOff(&busy)
	defer keepOff(&unix.CPUSet{})
	// (the companion puts back the mask it had before keepOff)
	if err := unix.SchedSetaffinity(cmd.Process.Pid, &started); err != nil {
		t.Fatal(err)
	}
	Settled(cmd.Process.Pid)
	for tid, set := range testutil.CPUMasks(t, cmd.Process.Pid) {
		if set.IsSet(firstCPU(started)) || set.Count() != started.Count()-1 {
			t.Errorf("settled, companion thread %d has %d CPUs, CPU %d among them: %v", tid, set.Count(), firstCPU(started), set.IsSet(firstCPU(started)))
		}
	}
}

func firstCPU(set unix.CPUSet) int {
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			return cpu
		}
	}
	return -1
}
