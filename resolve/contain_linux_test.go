//go:build linux

package resolve

import (
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/ptrace"
	"stackshot/symtab"
)

// A panic while unwinding one thread (made by the test hook, standing for
// a bug met on hostile bytes) becomes that thread's error; the other
// threads of the process are resolved as usual, and so is the thread the
// next time. The capture's no-stop check, which unwinds too, survives it.
func TestThreadPanicContained(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O0", "-g", "-fno-omit-frame-pointer", "-pthread")
	tg := testutil.Start(t, bin)
	r := NewResolver(symtab.New(symtab.Options{}), Options{Live: true})
	var victim int
	unwindHook = func(tid int) {
		if tid == victim {
			panic("test hook: unwinder panic")
		}
	}
	defer func() { unwindHook = nil }()
	// First a capture to learn the victim's tid: the condwait thread.
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeNoStop}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range p.Threads {
		if th.Name == "condwait" {
			victim = th.TID
		}
	}
	if victim == 0 {
		t.Fatalf("no condwait thread in %+v", p.Threads)
	}
	var space *Space
	check := func(p *ptrace.Process, th *ptrace.Thread) bool {
		if space == nil {
			mem := ptrace.MemReader{PID: p.MemPID()}
			CollectImages(p, mem)
			space = r.Space(p, mem)
		}
		return space.CheckNoStop(th)
	}
	p, err = ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, check)
	if err != nil {
		t.Fatal(err)
	}
	rp := r.Process(p, ptrace.MemReader{PID: p.MemPID()})
	if len(rp.Threads) != len(p.Threads) {
		t.Fatalf("%d threads resolved of %d", len(rp.Threads), len(p.Threads))
	}
	for _, th := range rp.Threads {
		var funcs []string
		for _, f := range th.Frames {
			funcs = append(funcs, f.Function)
		}
		all := strings.Join(funcs, " ")
		switch th.Name {
		case "condwait":
			if !strings.Contains(th.Error, "internal error while resolving thread") || !strings.Contains(th.Error, "test hook: unwinder panic") {
				t.Errorf("condwait: error %q, want the contained panic", th.Error)
			}
			if th.TID != victim || th.State == "" {
				t.Errorf("condwait: tid %d state %q: the thread's identity is lost", th.TID, th.State)
			}
		case "reader":
			if !strings.Contains(all, "reader_c reader_b reader_a") || th.Error != "" {
				t.Errorf("reader: frames %s, error %q", all, th.Error)
			}
		case "sleeper":
			if !strings.Contains(all, "sleep_c sleep_b sleep_a") {
				t.Errorf("sleeper: frames %s, error %q", all, th.Error)
			}
		}
	}
	victim = -1
	rp = r.Process(p, ptrace.MemReader{PID: p.MemPID()})
	for _, th := range rp.Threads {
		if th.Name == "condwait" && (th.Error != "" || len(th.Frames) == 0) {
			t.Errorf("after the panic, condwait resolves to %d frames, error %q", len(th.Frames), th.Error)
		}
	}
}
