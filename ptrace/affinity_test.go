//go:build linux

package ptrace

import (
	"os"
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
