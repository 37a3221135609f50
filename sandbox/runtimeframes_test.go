//go:build linux

package sandbox

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
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
	// Each thread's threading name, as the program printed them.
	var want struct {
		PyNames map[string]string `json:"pynames"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(tg.Ready, "ready ")), &want); err != nil {
		t.Fatalf("scenes.py's ready line: %v", err)
	}
	named := 0
	for _, th := range rp.Threads {
		if w, ok := want.PyNames[strconv.Itoa(th.TID)]; ok {
			named++
			if th.PythonName != w {
				t.Errorf("thread %d: Python name %q, want %q (warnings %q)", th.TID, th.PythonName, w, rp.Warnings)
			}
		}
	}
	if named != len(want.PyNames) || named < 2 {
		t.Errorf("%d threads of the %d the program named are in the report", named, len(want.PyNames))
	}
	c.Locks(rp, tasks)
	c.Goroutines(p, rp)
	if c.asked[kLocks] != 0 || c.asked[kGo] != 0 || c.asked[kRuntime] != 1 {
		t.Errorf("asked %v: want one runtime request, the lock owners and goroutines kept from the resolve", c.asked)
	}
}

// TestJoinRuntimeNames: the parent takes a thread's threading name from
// the child's answer only when it is at most pyruntime.MaxName bytes of
// UTF-8; else the whole answer is refused.
func TestJoinRuntimeNames(t *testing.T) {
	answer := func(name string) *upMsg {
		return &upMsg{Kind: kRuntime, RuntimeRead: true, Result: &report.Process{Runtime: &report.Runtime{Name: "python", Version: "3.12.1"},
			Threads: []report.Thread{{TID: 1, PythonName: "MainThread"}, {TID: 2, PythonName: name}}}}
	}
	for name, ok := range map[string]bool{
		"worker-1": true, "\u65e5\x1b[2J": true, strings.Repeat("x", pyruntime.MaxName): true,
		strings.Repeat("x", pyruntime.MaxName+1): false, "\xff": false,
	} {
		rp := &report.Process{Threads: []report.Thread{{TID: 1}, {TID: 2}}}
		err := joinRuntime(rp, answer(name), "python")
		if (err == nil) != ok {
			t.Errorf("name %q: %v", name, err)
		}
		if ok && (rp.Threads[0].PythonName != "MainThread" || rp.Threads[1].PythonName != name) {
			t.Errorf("name %q: taken as %q, %q", name, rp.Threads[0].PythonName, rp.Threads[1].PythonName)
		}
		if !ok && rp.Threads[1].PythonName != "" {
			t.Errorf("name %q taken", name)
		}
	}
}
