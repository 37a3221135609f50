//go:build linux

package sandbox

import (
	"os"
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
)

// The Python frames of another user's CPython process, read by the child
// (kRuntime) after a resolve that went on with the lock owners and the
// goroutines (ResolveThen): the frames are in the threads (the main
// thread's innermost is main_idle, as scenes.py's source says), the
// runtime is named, and the answers the resolve owed are kept for Locks
// and Goroutines, which ask nothing again.
func TestRuntimeFramesKeepsOwedAnswers(t *testing.T) {
	python := "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		testutil.Skip(t, python+" is not installed on this machine")
	}
	tg := startOther(t, python, testutil.Testdata("python", "scenes.py"))
	tgt, _ := TargetOf(tg.PID)
	c := startChild(t, liveConfig(), tgt)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
	if err != nil {
		t.Fatal(err)
	}
	tasks := procmaps.TaskSet(tg.PID)
	rp, err := c.ResolveThen(p, Then{Locks: true, Tasks: func() map[int]bool { return tasks }, Goroutines: true})
	if err != nil {
		t.Fatal(err)
	}
	cands := pyruntime.Candidates(p.Exe, p.Maps, pyruntime.EvalModules(rp))
	if c.RuntimeFrames(p, rp, "python", cands) == nil {
		t.Fatalf("no Python runtime found: %q", rp.Warnings)
	}
	if rp.Runtime == nil || rp.Runtime.Name != "python" || !strings.HasPrefix(rp.Runtime.Version, "3.11.") {
		t.Errorf("runtime %+v", rp.Runtime)
	}
	var main []string
	for _, th := range rp.Threads {
		if th.TID != tg.PID {
			continue
		}
		for _, f := range th.Frames {
			if f.Kind == "python" {
				main = append(main, f.Function)
			}
		}
	}
	if len(main) == 0 || main[0] != "main_idle" {
		t.Errorf("main thread's Python frames %q, want main_idle innermost (warnings %q)", main, rp.Warnings)
	}
	c.Locks(rp, tasks)
	c.Goroutines(p, rp)
	if c.asked[kLocks] != 0 || c.asked[kGo] != 0 || c.asked[kRuntime] != 1 {
		t.Errorf("asked %v: want one runtime request, the lock owners and goroutines kept from the resolve", c.asked)
	}
}
