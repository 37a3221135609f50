//go:build linux

package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"stackshot/internal/diskcache"
	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/resolve"
	"stackshot/symtab"
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
	tasks := procmaps.TaskSet(tg.PID)
	first, err := c.ResolveThen(p, Then{Locks: true, Tasks: func() map[int]bool { return tasks }, Goroutines: true})
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

// A capture's first check (CheckAll) has the child read the build ids and
// vdso and keep the process as its space in the same round trip: the
// build ids and vdso are those read in-process, no kSpace is sent, the
// blocked threads are read without a stop, and the resolved frames are
// those of the in-process resolver.
func TestCheckAllReadsImagesOnce(t *testing.T) {
	tg := startAsOther(t)
	c, p := captureChecked(t, tg)
	if c.asked[kImages] != 1 || c.asked[kSpace] != 0 || c.asked[kCheckAll] < 1 || c.dead != nil {
		t.Fatalf("requests %v (want one images, no space, checks), child failed: %v", c.asked, c.dead)
	}
	mem := ptrace.MemReader{PID: tg.PID}
	mine := &ptrace.Process{PID: p.PID, Maps: p.Maps}
	resolve.CollectImages(mine, mem)
	if len(p.BuildIDs) < 2 || fmt.Sprint(mine.BuildIDs) != fmt.Sprint(p.BuildIDs) || len(p.VDSO) == 0 || string(mine.VDSO) != string(p.VDSO) {
		t.Errorf("build ids from the child %v, here %v (vdso %d bytes, equal: %v)", p.BuildIDs, mine.BuildIDs, len(p.VDSO), string(mine.VDSO) == string(p.VDSO))
	}
	nostop := 0
	for _, th := range p.Threads {
		if th.Method == ptrace.MethodNoStop {
			nostop++
		}
	}
	if nostop < 5 {
		t.Errorf("%d of %d threads read without a stop, want the blocked ones (>= 5)", nostop, len(p.Threads))
	}
	got, err := c.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	want := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true}).Process(p, mem)
	gc, wc := chains(got), chains(want)
	if len(wc) < 7 || len(gc) != len(wc) {
		t.Fatalf("threads: sandbox %d, in-process %d", len(gc), len(wc))
	}
	for name, w := range wc {
		if gc[name] != w {
			t.Errorf("thread %s:\n sandbox    %s\n in-process %s", name, gc[name], w)
		}
	}
}

// A dump's resolve with Then.Flush has the child hand over its cache
// entries right after its answers: they are written by the time Close
// returns, as when Close asks for them, which it then does not.
func TestResolveThenFlush(t *testing.T) {
	tg := startAsOther(t)
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _, _ := boxedDump(t, nil, tg.PID)
	cache, err := diskcache.Open(filepath.Join(t.TempDir(), "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	cfg := liveConfig()
	cfg.Cache = cache
	c, err := Start(cfg, tgt)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto, CheckAll: c.CheckAll()}, nil)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	rp, err := c.ResolveThen(p, Then{Flush: true})
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	dir := c.CacheDir()
	c.Close()
	_, puts := c.CacheCalls()
	if got := entries(t, dir); len(got) == 0 || puts < len(got) || c.asked[kFlush] != 0 {
		t.Errorf("%d entries written, %d handed over, %d flush requests (want some, all handed over, none asked)", len(got), puts, c.asked[kFlush])
	}
	got := chains(rp)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("thread %s:\n got  %s\n want %s", name, got[name], w)
		}
	}
}

// A capture of many threads sends its checks to the child in batches as
// it observes them (ptrace.Options.CheckAll): the images are still asked
// once, with the first batch, every blocked thread is read without a
// stop, and the resolve gives the in-process resolver's frames.
func TestCheckAllInBatches(t *testing.T) {
	tg := startTargetAsOther(t, "many.c", "150")
	c, p := captureChecked(t, tg)
	if c.asked[kImages] != 1 || c.asked[kSpace] != 0 || c.asked[kCheckAll] < 3 || c.dead != nil || len(c.pending) != 0 {
		t.Fatalf("requests %v (want one images, no space, checks in batches), %d answers owed, child failed: %v", c.asked, len(c.pending), c.dead)
	}
	for _, th := range p.Threads {
		if th.Method != ptrace.MethodNoStop {
			t.Errorf("thread %d (%s): %s, want read without a stop", th.TID, th.Name, th.Method)
		}
	}
	got, err := c.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	want := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true}).Process(p, ptrace.MemReader{PID: tg.PID})
	gc, wc := chains(got), chains(want)
	if len(wc) != 151 || len(gc) != len(wc) {
		t.Fatalf("threads: sandbox %d, in-process %d", len(gc), len(wc))
	}
	for name, w := range wc {
		if gc[name] != w || !strings.Contains(w, "work_b") && name != "many" {
			t.Errorf("thread %s:\n sandbox    %s\n in-process %s", name, gc[name], w)
		}
	}
}

// captureChecked captures tg in the auto mode, its checks made by a
// child started for it.
func captureChecked(t *testing.T, tg *testutil.Target) (*Child, *ptrace.Process) {
	t.Helper()
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, liveConfig(), tgt)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto, CheckAll: c.CheckAll()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, p
}

// A capture's first checks are sent while the child starts, before its
// answer to the setup is read: they wait in the socket. A child that
// never becomes ready (its lockdown fails, the first time only) answers no
// check (those threads are stopped) and is started again, silently: the
// second names the frames. When both fail ("lockdown!": the hook on both
// tries), one line says the names are lost and why, and the child
// returned answers every request with that line and unnamed frames. A
// child that was ready and then failed (a crash in the checks) did start:
// that failure costs names. Nothing is parsed in-process in any case.
func TestChecksSentWhileStarting(t *testing.T) {
	tg := startTargetAsOther(t, "many.c", "20")
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	parsedBefore := InProcess()
	for _, hook := range []string{"", "lockdown", "lockdown!", "checkall:crash"} {
		TestHook = strings.TrimSuffix(hook, "!")
		l := Launch(liveConfig(), tgt)
		c := l.Early() // (its setup sent: the hook read)
		if hook != "lockdown!" {
			TestHook = ""
		}
		if c == nil {
			t.Fatalf("%q: no child", hook)
		}
		var asked []string
		p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto, CheckAll: func(p *ptrace.Process, ths []*ptrace.Thread) func() []bool {
			answers := c.CheckAll()(p, ths)
			if asked == nil {
				asked = append(asked, c.pending...)
			}
			return answers
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// (A child whose lockdown failed may be gone before the first
		// batch: nothing is then sent.)
		if want := []string{kSetup, kImages, kCheckAll}; !strings.HasPrefix(hook, "lockdown") && !slices.Equal(asked, want) {
			t.Errorf("%q: owed after the first batch %v, want %v (sent before the child was ready)", hook, asked, want)
		}
		var said []string
		got := l.Child("the target", func(s string) { said = append(said, s) })
		nostop := 0
		for _, th := range p.Threads {
			if th.Method == ptrace.MethodNoStop {
				nostop++
			}
		}
		switch hook {
		case "":
			if got != c || len(said) != 0 || nostop != len(p.Threads) {
				t.Fatalf("ready child: returned %v, said %q, %d of %d threads read without a stop", got == c, said, nostop, len(p.Threads))
			}
			rp, err := c.Resolve(p)
			if err != nil || !strings.Contains(chains(rp)["w-000"], "work_b") {
				t.Errorf("resolve: %v %v", chains(rp)["w-000"], err)
			}
		case "lockdown":
			if got == nil || got == c || got.NeverStarted() || len(said) != 0 {
				t.Fatalf("never ready once: another child %v, said %q", got != nil && got != c, said)
			}
			if c.Started() == nil || nostop != 0 {
				t.Errorf("never ready: started %v; %d threads read without a stop on its (no) answers", c.Started(), nostop)
			}
			p.BuildIDs = nil // (asked of the first: live.Session.captureLive does the same)
			rp, err := got.Resolve(p)
			if err != nil || !strings.Contains(chains(rp)["w-000"], "work_b") {
				t.Errorf("resolve in the child started again: %v %v", chains(rp)["w-000"], err)
			}
			got.Close()
		case "lockdown!":
			TestHook = ""
			line := "names of the target lost: the sandboxed parser did not start (test hook: the lockdown fails; --no-sandbox parses it inside stackshot itself)"
			if got == nil || !got.NeverStarted() || len(said) != 1 || said[0] != line {
				t.Fatalf("never ready twice: a failed child %v, said %q", got != nil && got.NeverStarted(), said)
			}
			if nostop != 0 {
				t.Errorf("never ready: %d threads read without a stop on its (no) answers", nostop)
			}
			rp, err := got.Resolve(p)
			if err == nil || err.Error() != line || len(rp.Threads) != len(p.Threads) {
				t.Fatalf("resolve by a child that never started: %v", err)
			}
			for _, th := range rp.Threads {
				for _, f := range th.Frames {
					if f.Function != "" {
						t.Errorf("thread %d: frame %#x named %q by no parser", th.TID, f.PC, f.Function)
					}
				}
			}
			p.BuildIDs = nil
			if err := got.Images(p); err == nil || err.Error() != line {
				t.Errorf("images of a child that never started: %v", err)
			}
		case "checkall:crash":
			if got != c || len(said) != 0 || c.Started() != nil || c.dead == nil {
				t.Fatalf("crashed in its checks: returned %v, said %q, started %v, failed %v", got == c, said, c.Started(), c.dead)
			}
			if _, err := c.Resolve(p); err == nil || !strings.Contains(err.Error(), "names of process") {
				t.Errorf("resolve after the crash: %v", err)
			}
		}
		c.Close()
	}
	if n := InProcess() - parsedBefore; n != 0 {
		t.Errorf("%d parsings in-process", n)
	}
}
