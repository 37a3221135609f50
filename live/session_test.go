//go:build linux

package live

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
	"stackshot/unwind"
)

// build builds testdata/targets/NAME.c.
func build(t testing.TB, name string) string {
	return testutil.Build(t, "gcc", []string{testutil.Testdata("targets", name+".c")}, "-O0", "-g", "-fno-omit-frame-pointer", "-pthread")
}

// functions are the function names of a thread's frames, innermost first.
func functions(th report.Thread) []string {
	var fns []string
	for _, f := range th.Frames {
		fns = append(fns, f.Function)
	}
	return fns
}

// A session dumps a live process (each thread at its chain, every thread
// of it) and says, through Say, why a pid that names no process could not
// be read; the pid that could is reported.
func TestDumpSession(t *testing.T) {
	tg := testutil.Start(t, build(t, "blocked"))
	var said []string
	s := newBenchSession()
	s.o.Say = func(msg string) { said = append(said, msg) }
	defer s.Close()
	gone := 1 << 22 // above pid_max's default: no process
	procs, failed, err := s.Dump([]int{tg.PID, gone})
	if err != nil || failed != 1 || len(procs) != 1 {
		t.Fatalf("Dump: %d reports, %d failed, %v; said %q", len(procs), failed, err, said)
	}
	want := fmt.Sprintf("cannot read process %d (no such process; check the pid with ps)", gone)
	if len(said) != 1 || said[0] != want {
		t.Errorf("said %q, want [%q]", said, want)
	}
	p := procs[0]
	if p.PID != tg.PID || len(p.Threads) != len(testutil.ThreadStates(tg.PID)) {
		t.Fatalf("pid %d with %d threads; want pid %d with %d", p.PID, len(p.Threads), tg.PID, len(testutil.ThreadStates(tg.PID)))
	}
	for _, th := range p.Threads {
		if th.Name != "reader" {
			continue
		}
		fns := strings.Join(functions(th), " ")
		if !strings.Contains(fns, "reader_c reader_b reader_a") {
			t.Errorf("reader's frames: %s", fns)
		}
		return
	}
	t.Errorf("no thread named reader")
}

// A session whose target is parsed in its sandboxed child (forced) dumps
// it alike: the reader's chain, every thread, diagnosed there.
func TestDumpSessionSandboxed(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	t.Setenv("STACKSHOT_SANDBOX", "1")
	tg := testutil.Start(t, build(t, "blocked"))
	var said []string
	s := newBenchSession()
	s.o.Say = func(msg string) { said = append(said, msg) }
	defer s.Close()
	procs, failed, err := s.Dump([]int{tg.PID})
	if err != nil || failed != 0 || len(procs) != 1 || len(said) != 0 {
		t.Fatalf("Dump: %d reports, %d failed, %v; said %q", len(procs), failed, err, said)
	}
	if s.boxes[tg.PID] == nil {
		t.Fatalf("no sandboxed child for process %d", tg.PID)
	}
	p := procs[0]
	if len(p.Threads) != len(testutil.ThreadStates(tg.PID)) || !p.Diagnosed {
		t.Fatalf("%d threads (want %d), diagnosed %v; warnings %q", len(p.Threads), len(testutil.ThreadStates(tg.PID)), p.Diagnosed, p.Warnings)
	}
	for _, th := range p.Threads {
		if th.Name == "reader" {
			if fns := strings.Join(functions(th), " "); !strings.Contains(fns, "reader_c reader_b reader_a") {
				t.Errorf("reader's frames: %s", fns)
			}
			return
		}
	}
	t.Errorf("no thread named reader")
}

// With Count > 1 the session takes that many snapshots, Interval apart,
// and marks each thread with its progress: a thread blocked in read all
// along is stuck.
func TestDumpSnapshots(t *testing.T) {
	tg := testutil.Start(t, build(t, "blocked"))
	s := newBenchSession()
	s.o.Count, s.o.Interval = 2, 50*time.Millisecond
	defer s.Close()
	procs, failed, err := s.Dump([]int{tg.PID})
	if err != nil || failed != 0 || len(procs) != 1 {
		t.Fatalf("Dump: %d reports, %d failed, %v", len(procs), failed, err)
	}
	for _, th := range procs[0].Threads {
		if th.Name == "reader" {
			if th.Progress != report.ProgressStuck {
				t.Errorf("reader's progress is %q, want %q", th.Progress, report.ProgressStuck)
			}
			return
		}
	}
	t.Errorf("no thread named reader")
}

// A process read after it exited is said to have exited, once: no
// doubled "reading maps: reading maps:".
func TestExitedMidReadMessage(t *testing.T) {
	tg := testutil.Start(t, build(t, "hot"))
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", tg.PID))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tg.Stop() // killed and reaped: the open file now reads ESRCH
	_, err = procmaps.ParseMaps(f)
	if err == nil {
		t.Skip("this kernel reads the maps of a reaped process without an error")
	}
	msg := ExplainCaptureError(tg.PID, fmt.Errorf("reading maps: %w", err)).Error()
	want := fmt.Sprintf("cannot read process %d (it exited while being read; nothing to show)", tg.PID)
	if msg != want {
		t.Errorf("got %q, want %q", msg, want)
	}
}

// As root, a refusal does not end in "run as root".
func TestPermissionHelpAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root")
	}
	tg := testutil.Start(t, build(t, "hot"))
	if h := permissionHelp(tg.PID); strings.Contains(h, "run as root") || strings.Contains(h, "or as root") {
		t.Errorf("as root, the hint says to run as root: %q", h)
	}
}

// newBenchSession is a session as dump's defaults make it: the test's own
// targets are parsed in-process unless STACKSHOT_SANDBOX=1 forces the
// sandboxed child (the test binary, see TestMain).
func newBenchSession() *Session {
	return New(symtab.New(symtab.Options{NamesOnly: true}), Options{Capture: ptrace.Options{Kernel: true},
		Resolve: resolve.Options{MaxFrames: unwind.DefaultMaxFrames, Kernel: true}, Timeout: 10 * time.Second,
		Goroutines: true, Started: time.Now()})
}
