//go:build linux

package sandbox

import (
	"testing"

	"stackshot/procmaps"
	"stackshot/ptrace"
)

// Answers ResolveThen's request owes and nobody reads are read and
// dropped before the next request: a report asked about that is not the
// one resolved gets its own request, and the conversation stays in step
// (the same frames the second time, the same owners as asked directly).
func TestResolveThenUnreadAnswers(t *testing.T) {
	tg := startAsOther(t)
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, liveConfig(), tgt)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[int]bool{}
	tids, _ := procmaps.Tasks(tg.PID)
	for _, tid := range tids {
		tasks[tid] = true
	}
	first, err := c.ResolveThen(p, Then{Locks: true, Tasks: tasks, Goroutines: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.pending) != 2 {
		t.Fatalf("pending answers %q, want locks and go", c.pending)
	}
	second, err := c.Resolve(p) // (the first's answers dropped)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.pending) != 0 || c.dead != nil {
		t.Fatalf("pending %q, child failed: %v", c.pending, c.dead)
	}
	a, b := chains(first), chains(second)
	if len(a) < 7 || len(a) != len(b) {
		t.Fatalf("threads: %d, then %d", len(a), len(b))
	}
	for name, w := range a {
		if b[name] != w {
			t.Errorf("thread %s:\n first  %s\n second %s", name, w, b[name])
		}
	}
	c.Locks(second, tasks) // not the report resolved with Then: asked
	if c.asked[kLocks] != 1 || !second.Diagnosed {
		t.Errorf("%d lock requests, diagnosed %v; want 1, true", c.asked[kLocks], second.Diagnosed)
	}
	c.Locks(first, tasks) // its answer was dropped: asked too
	if c.asked[kLocks] != 2 || !first.Diagnosed {
		t.Errorf("%d lock requests, diagnosed %v; want 2, true", c.asked[kLocks], first.Diagnosed)
	}
	found := 0
	for i := range first.Threads {
		f, s := first.Threads[i].WaitingFor, second.Threads[i].WaitingFor
		if f != nil {
			found++
		}
		if (f == nil) != (s == nil) || f != nil && f.Kind != s.Kind {
			t.Errorf("thread %s: waits for %+v, then %+v", first.Threads[i].Name, f, s)
		}
	}
	if found == 0 {
		t.Errorf("no thread waits for anything (condwait waits for a condition variable)")
	}
}
