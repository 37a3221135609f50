//go:build linux

package main

// report of a Go program's aarch64 core: built with GOARCH=arm64, run
// under qemu, aborted once its goroutines are parked. GOTRACEBACK=crash
// makes the Go runtime print, before it dies, the stack each thread was
// running when it was stopped (each thread is sent SIGQUIT and waits in
// its handler): that, with the return addresses it prints, and
// gdb-multiarch on the same core are the independent chains.

import (
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// goTraceFrame is one frame of the Go runtime's crash traceback.
type goTraceFrame struct {
	fn string
	pc uint64
}

var (
	goTraceSection = regexp.MustCompile(`^(SIGABRT|SIGQUIT): `)
	goTraceFunc    = regexp.MustCompile(`^([^\s(][^(]*)\(.*\)$`)
	goTracePC      = regexp.MustCompile(`^\t\S+ .* pc=0x([0-9a-f]+)$`)
)

// goTracebacks returns, for each thread the runtime's crash traceback
// shows, the frames of the goroutine it ran (its first goroutine), inlined
// calls ("f(...)", no frame of their own) left out.
func goTracebacks(stderr string) [][]goTraceFrame {
	var out [][]goTraceFrame
	var cur []goTraceFrame
	state := 0 // 0: before a section, 1: in its header, 2: in its stack
	fn := ""
	for _, l := range strings.Split(stderr, "\n") {
		switch {
		case goTraceSection.MatchString(l):
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur, state = nil, 1
		case state == 1 && strings.HasPrefix(l, "goroutine "):
			state = 2
		case state == 2 && goTraceFunc.MatchString(l):
			fn = goTraceFunc.FindStringSubmatch(l)[1]
		case state == 2 && goTracePC.MatchString(l):
			pc, _ := strconv.ParseUint(goTracePC.FindStringSubmatch(l)[1], 16, 64)
			cur = append(cur, goTraceFrame{fn, pc})
		case state == 2 && strings.HasPrefix(l, "\t"), state == 2 && strings.HasPrefix(l, "created by "):
		case state == 2:
			state = 0 // the goroutine's stack ended
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// TestReportARM64GoCore: every thread of an aborted Go arm64 program is
// unwound through its signal handler (runtime.sigtramp, qemu's sigreturn
// trampoline) to the code it was stopped in and on to the thread's root,
// by Go's own frame sizes (a stack switch followed to the goroutine's
// stack); the chain after the
// signal frame is the one the Go runtime printed for that thread (the
// same return addresses; the runtime starts a goroutine in a system call
// at its call into the system call path), the chain before it is
// gdb-multiarch's (which stops at runtime.sigtramp).
func TestReportARM64GoCore(t *testing.T) {
	tc := testutil.GoToolchain{Name: testutil.Release(runtime.Version()), Go: "go", Env: []string{"GOTOOLCHAIN=local"}}
	exe := testutil.BuildGo(t, tc, testutil.Testdata("targets", "arm64", "goparked"), []string{"GOARCH=arm64", "CGO_ENABLED=0"})
	for _, v := range []struct {
		name  string
		strip bool
	}{{"debug", false}, {"stripped", true}} {
		t.Run(v.name, func(t *testing.T) {
			bin := exe
			if v.strip {
				// No .debug_frame: Go's pclntab alone.
				bin = testutil.BuildGo(t, tc, testutil.Testdata("targets", "arm64", "goparked"),
					[]string{"GOARCH=arm64", "CGO_ENABLED=0"}, "-ldflags=-s -w")
			}
			core, stderr := qemuCore(t, bin, []string{"GOTRACEBACK=crash"}, true)
			p := reportCore(t, "-e", bin, core)
			traces := goTracebacks(stderr)
			if len(traces) < 4 {
				t.Fatalf("the Go runtime printed %d threads' stacks, want >= 4:\n%s", len(traces), stderr)
			}
			used := make([]bool, len(traces))
			var ours [][]goTraceFrame
			var before [][]string // each thread's chain up to its first signal frame
			for _, th := range p.Threads {
				var pre, post []goTraceFrame
				sig := false
				for _, f := range th.Frames {
					if f.Inlined {
						continue
					}
					if f.SignalFrame {
						sig, post = true, nil
						continue
					}
					pc, _ := strconv.ParseUint(strings.TrimPrefix(f.PC, "0x"), 16, 64)
					if !sig {
						pre = append(pre, goTraceFrame{f.Fn(), pc})
					} else {
						post = append(post, goTraceFrame{f.Fn(), pc})
					}
				}
				if !sig || len(post) == 0 {
					t.Errorf("thread %d: nothing past a signal frame: %v", th.TID, pre)
					continue
				}
				var names []string
				for _, f := range pre {
					names = append(names, f.fn)
				}
				before = append(before, names)
				// (runtime.morestack is a root too: the runtime finds its
				// caller through g alone, and its traceback ends there)
				if last := post[len(post)-1].fn; last != "runtime.goexit" && last != "runtime.mstart" &&
					last != "runtime.mcall" && last != "runtime.morestack" {
					t.Errorf("thread %d ends at %s, not at a thread's or goroutine's root: %v", th.TID, last, post)
				}
				ours = append(ours, post)
				if slices.ContainsFunc(post, func(f goTraceFrame) bool { return f.fn == "runtime.systemstack" }) {
					t.Logf("thread %d crosses runtime.systemstack: %v", th.TID, post)
				}
				for k, tr := range traces {
					if !used[k] && goChainMatches(post, tr) {
						used[k] = true
						break
					}
				}
			}
			for k, tr := range traces {
				if !used[k] {
					t.Errorf("no thread has the runtime's chain %v\nours (after the signal frame): %v", tr, ours)
				}
			}
			if v.strip {
				return // (gdb-multiarch names nothing in a stripped Go binary)
			}
			// gdb-multiarch, on the same core, up to runtime.sigtramp.
			g := gdbChains(t, bin, core, 3*time.Minute, "thread apply all bt")
			for i, th := range p.Threads {
				if gc := g[th.TID]; !slices.Equal(before[i], gc) {
					t.Errorf("thread %d: stackshot %v, gdb-multiarch %v", th.TID, before[i], gc)
				}
			}
		})
	}
}

// goChainMatches: the runtime's chain tr ends ours (post): the same
// functions, the same return addresses after its first frame (whose PC
// the runtime takes, for a goroutine in a system call, from where it
// entered it).
//
// The runtime's traceback of a thread on its system stack ends at
// runtime.systemstack; ours goes on to the goroutine that switched there,
// so tr then ends ours at our runtime.systemstack frame.
func goChainMatches(post, tr []goTraceFrame) bool {
	if tr[len(tr)-1].fn == "runtime.systemstack" {
		for i, f := range post {
			if f.fn == "runtime.systemstack" {
				post = post[:i+1]
				break
			}
		}
	}
	if len(post) < len(tr) {
		return false
	}
	tail := post[len(post)-len(tr):]
	for i := range tr {
		if tail[i].fn != tr[i].fn || i > 0 && tail[i].pc != tr[i].pc {
			return false
		}
	}
	return true
}
