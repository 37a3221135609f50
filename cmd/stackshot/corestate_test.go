//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// A report of stackshot's own core says each thread's state, as /proc
// said it when the core was taken, and its kernel frames by name, as
// /proc/PID/task/TID/stack names them (a gcore or kernel core has
// neither: TestReportGcore).
func TestReportStackshotCoreThreadStates(t *testing.T) {
	tg := testutil.Start(t, buildLocks(t), "rwlock")
	states := testutil.ThreadStates(tg.PID)
	kstack := map[int][]string{}
	for tid := range states {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stack", tg.PID, tid))
		if err != nil {
			continue // (not root: kernel frames are not checked)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				fn, _, _ := strings.Cut(f[1], "+")
				kstack[tid] = append(kstack[tid], fn)
			}
		}
	}
	p, _ := reportDiagJSON(t, captureCore(t, tg))
	if len(p.Threads) != len(states) {
		t.Fatalf("%d threads in the core, /proc had %d", len(p.Threads), len(states))
	}
	checked := 0
	for _, th := range p.Threads {
		if want := states[th.TID]; th.State != want {
			t.Errorf("thread %d %q: state %q, /proc said %q", th.TID, th.Name, th.State, want)
		}
		var got []string
		for _, f := range th.Frames {
			if f.Kind == "kernel" {
				got = append(got, f.Fn())
			}
		}
		want := kstack[th.TID]
		if want == nil {
			continue
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("thread %d %q: kernel frames %v, /proc/.../stack says %v", th.TID, th.Name, got, want)
		}
		checked++
	}
	if len(kstack) > 0 && checked != len(states) {
		t.Errorf("kernel frames checked for %d of %d threads", checked, len(states))
	}
}

// A process-shared mutex held by another process, read from a core: the
// owner's process is not claimed (no /proc of the time), and the note
// says why.
func TestReportCoreProcessSharedOwner(t *testing.T) {
	tg := testutil.Start(t, buildEdges(t), "pshared")
	v := readyVals(t, tg.Ready)
	waiter := tidOf(t, v, "waiter")
	p, _ := reportDiagJSON(t, captureCore(t, tg, "--core-memory", "all"))
	w := threadByTID(t, p, waiter).WaitingFor
	if w == nil || w.Kind != "mutex" || w.Address == nil || *w.Address != addrOf(t, v, "m") {
		t.Fatalf("waiter waits for %+v, want mutex %s", w, addrOf(t, v, "m"))
	}
	if w.OwnerTID != nil || w.OwnerPID != 0 {
		t.Errorf("owner tid %v pid %d claimed from a core", w.OwnerTID, w.OwnerPID)
	}
	if want := "the owner is a thread of another process; a core cannot prove which process"; !strings.HasPrefix(w.Note, want) {
		t.Errorf("note %q, want it to start %q", w.Note, want)
	}
}
