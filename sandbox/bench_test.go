//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// BenchmarkColdDump is a whole cold dump of a small process of another
// user (blocked.c, 8 threads): capture in auto mode, unwind and symbolize
// with nothing cached, in-process and through a new sandboxed child (its
// start, lockdown and every file handed over included).
func BenchmarkColdDump(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	setpriv := testutil.Need(b, "setpriv")
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, setpriv, "--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--", bin)
	st, err := procmaps.ReadStatus(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	tgt := Target{PID: tg.PID, UID: st.UIDs[1], GID: st.GIDs[1]}
	opts := resolve.Options{Live: true}
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			r := resolve.NewResolver(symtab.New(symtab.Options{}), opts)
			p, err := r.CaptureLive(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto})
			if err != nil {
				b.Fatal(err)
			}
			r.Process(p, ptrace.MemReader{PID: p.MemPID()})
		}
	})
	b.Run("sandbox", func(b *testing.B) {
		for b.Loop() {
			c, err := Start(Config{Resolve: opts}, tgt)
			if err != nil {
				b.Fatal(err)
			}
			p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Resolve(p); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(c.calls[kMem]), "memcalls/op")
			b.ReportMetric(float64(c.calls[kOpen]), "opens/op")
			c.Close()
		}
	})
	b.Run("sandbox-start", func(b *testing.B) {
		for b.Loop() {
			c, err := Start(Config{Resolve: opts}, tgt)
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
}

// BenchmarkWarmResolve is one sampler tick's resolution of an 8-thread
// capture with every module already loaded: in-process, and in a child
// (the capture sent, the result sent back). The difference is what the
// sandbox would add to every tick of record.
func BenchmarkWarmResolve(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	setpriv := testutil.Need(b, "setpriv")
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, setpriv, "--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--", bin)
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	opts := resolve.Options{Live: true}
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeNoStop}, nil)
	if err != nil {
		b.Fatal(err)
	}
	mem := ptrace.MemReader{PID: tg.PID}
	resolve.CollectImages(p, mem)
	stack := 0
	for _, th := range p.Threads {
		stack += len(th.Stack)
	}
	b.Run("in-process", func(b *testing.B) {
		r := resolve.NewResolver(symtab.New(symtab.Options{}), opts)
		r.Process(p, mem)
		for b.Loop() {
			r.Process(p, mem)
		}
		b.ReportMetric(float64(stack), "stackbytes/op")
	})
	b.Run("sandbox", func(b *testing.B) {
		c, err := Start(Config{Resolve: opts}, tgt)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Resolve(p); err != nil {
			b.Fatal(err)
		}
		before := c.calls[kMem]
		for b.Loop() {
			if _, err := c.Resolve(p); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(c.calls[kMem]-before)/float64(b.N), "memcalls/op")
		b.ReportMetric(float64(stack), "stackbytes/op")
	})
}

// BenchmarkRuntimeLocks is what naming the RLock owners of another
// user's Python process adds to its sandboxed dump (rlocks.py under
// Debian's CPython 3.11: six threads wait for RLocks): the second round
// trip, the runtime's file handed over again, the runtime opened, its
// threads read and each owner read from the RLock on the waiter's stack.
func BenchmarkRuntimeLocks(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	setpriv := testutil.Need(b, "setpriv")
	python := testutil.Need(b, "/usr/bin/python3.11")
	tg := testutil.Start(b, setpriv, "--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--",
		python, testutil.Testdata("python", "rlocks.py"))
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	c, err := Start(liveConfig(), tgt)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
	if err != nil {
		b.Fatal(err)
	}
	tasks := procmaps.TaskSet(tg.PID)
	rp, err := c.ResolveThen(p, Then{Locks: true, Tasks: func() map[int]bool { return tasks }})
	if err != nil {
		b.Fatal(err)
	}
	at := c.RuntimeFrames(p, rp, "python", pyruntime.Candidates(p.Exe, p.Maps, pyruntime.EvalModules(rp)))
	if at == nil {
		b.Fatalf("no Python frames: %q", rp.Warnings)
	}
	c.Locks(rp, tasks)
	pyruntime.NameLockWaits(rp)
	asked := map[int]report.WaitingFor{}
	for _, th := range rp.Threads {
		if w := th.WaitingFor; w != nil && w.Kind == report.WaitPythonRLock {
			asked[th.TID] = *w
		}
	}
	for b.Loop() {
		for i := range rp.Threads {
			if w, ok := asked[rp.Threads[i].TID]; ok {
				rp.Threads[i].WaitingFor = &w
			}
		}
		c.RuntimeLocks(p, rp, "python", at, tasks)
	}
	named := 0
	for _, th := range rp.Threads {
		if w := th.WaitingFor; w != nil && w.Kind == report.WaitPythonRLock && w.OwnerTID != nil {
			named++
		}
	}
	if named != 6 {
		b.Fatalf("%d RLock owners named, want 6 (warnings %q)", named, rp.Warnings)
	}
}
