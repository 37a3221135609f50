//go:build linux

package sampler

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/perfsample"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/resolve"
	"stackshot/sandbox"
	"stackshot/symtab"
)

// The test binary is the sandboxed child's image too: started as
// sandbox.ChildCommand, it is the child, as stackshot itself is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ChildCommand {
		os.Exit(sandbox.Main())
	}
	sandbox.Prepare()
	os.Exit(m.Run())
}

// otherUser is the uid the sandbox tests run their targets as.
const otherUser = 1000

// startBusyAsOther starts blocked.c's busy threads as otherUser.
func startBusyAsOther(t *testing.T) *testutil.Target {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to an unprivileged user")
	}
	setpriv := testutil.Need(t, "setpriv")
	tg := testutil.Start(t, setpriv, "--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--",
		buildTarget(t, "blocked"), "spin", "busy")
	if st, err := procmaps.ReadStatus(tg.PID); err != nil || st.UIDs[1] != otherUser {
		t.Fatalf("target runs as %+v (%v), want uid %d", st.UIDs, err, otherUser)
	}
	return tg
}

// boxedSampler is newSampler with process pid's parsing in a sandboxed
// child, the first capture checked and its build ids read there too (as
// live.Session does); it returns the child.
func boxedSampler(t *testing.T, pid int, cfg Config) (*Sampler, *sandbox.Child, *[]string) {
	t.Helper()
	var warnings []string
	cfg.Warn = func(msg string) { warnings = append(warnings, msg) }
	if cfg.Freq == 0 {
		cfg.Freq = 99
	}
	tgt, err := sandbox.TargetOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	ropts := resolve.Options{Live: true, Sampler: true}
	child, err := sandbox.Start(sandbox.Config{Resolve: ropts}, tgt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Close() })
	cfg.Sandbox = func(p int) *sandbox.Child {
		if p != pid {
			t.Errorf("sandbox asked for process %d", p)
			return nil
		}
		return child
	}
	s, err := New(resolve.NewResolver(symtab.New(symtab.Options{}), ropts), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	mode := ptrace.ModeAuto
	if s.Perf() {
		mode = ptrace.ModeNoStop
	}
	p, err := ptrace.Capture(pid, ptrace.Options{Mode: mode, Deadline: time.Now().Add(10 * time.Second)}, child.Check())
	if err != nil {
		t.Fatalf("first capture: %v", err)
	}
	if err := child.Images(p); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	return s, child, &warnings
}

// Another user's busy threads, sampled with their parsing in the
// sandboxed child, give the chains they give in-process: with ptrace
// stops and with perf events (where the kernel allows them).
func TestSamplerSandboxSameChains(t *testing.T) {
	tg := startBusyAsOther(t)
	sources := []Source{SourcePtrace}
	if err := perfProbe(); err == nil {
		sources = append(sources, SourcePerf)
	}
	for _, src := range sources {
		cfg := Config{Duration: time.Second, Source: src}
		boxed, _, warnings := boxedSampler(t, tg.PID, cfg)
		boxed.Run()
		plain, _ := newSampler(t, tg.PID, cfg)
		plain.Run()
		bp, pp := boxed.Profile(), plain.Profile()
		if bp.Stats.Sampler != pp.Stats.Sampler || bp.Stats.Sampler != src.String() {
			t.Errorf("%v: sampled with %q in the sandbox, %q in-process", src, bp.Stats.Sampler, pp.Stats.Sampler)
		}
		bc, pc := chains(bp), chains(pp)
		for _, name := range []string{"spinner", "busy-0", "busy-1", "busy-2", "busy-3"} {
			b, p := slices.Sorted(maps.Keys(bc[name])), slices.Sorted(maps.Keys(pc[name]))
			if !slices.Equal(b, p) || len(b) == 0 {
				t.Errorf("%v: thread %s: chains in the sandbox %q, in-process %q", src, name, b, p)
			}
		}
		checkChain(t, bc, "spinner", "spin_c", "spin_b", "spin_a", "start")
		// Named in the child, with file and line as in-process.
		for _, smp := range bp.Samples {
			for _, f := range smp.Frames {
				if strings.HasPrefix(f.Function, "spin_") && (!strings.HasSuffix(f.File, "blocked.c") || f.Line == 0) {
					t.Errorf("%v: frame %s at %s:%d", src, f.Function, f.File, f.Line)
				}
			}
		}
		if len(*warnings) != 0 {
			t.Errorf("%v: warnings %q", src, *warnings)
		}
	}
}

// The child unwinds record's ticks: a crash there (test hook) costs the
// names, said once; the run goes on, each sample its raw address in its
// module, and the target runs on.
func TestSamplerSandboxCrash(t *testing.T) {
	tg := startBusyAsOther(t)
	sandbox.TestHook = "record:crash"
	defer func() { sandbox.TestHook = "" }()
	s, _, warnings := boxedSampler(t, tg.PID, Config{Duration: 500 * time.Millisecond, Source: SourcePtrace})
	if end := s.Run(); end != EndDuration {
		t.Fatalf("Run ended with %q", end)
	}
	want := fmt.Sprintf("names of process %d lost: the sandboxed parser failed", tg.PID)
	if len(*warnings) != 1 || !strings.HasPrefix((*warnings)[0], want) {
		t.Errorf("warnings %q, want one %q", *warnings, want)
	}
	p := s.Profile()
	if p.Stats.Samples == 0 || p.Stats.TruncatedWhy["sandboxed parser failed"] != p.Stats.Samples {
		t.Errorf("%d samples, truncated %v", p.Stats.Samples, p.Stats.TruncatedWhy)
	}
	raw := map[string]bool{}
	for _, smp := range p.Samples {
		// (A thread that could not be stopped in time has no registers,
		// and no frame: as in-process.)
		if len(smp.Frames) > 1 || len(smp.Frames) == 1 && (smp.Frames[0].Function != "" ||
			!strings.HasSuffix(smp.Frames[0].Module, "/blocked") || smp.Frames[0].ModuleOffset == 0) {
			t.Errorf("thread %s: frames %+v, want its raw address alone", smp.Thread, smp.Frames)
		}
		raw[smp.Thread] = raw[smp.Thread] || len(smp.Frames) == 1
	}
	for _, name := range []string{"spinner", "busy-0", "busy-1", "busy-2", "busy-3"} {
		if !raw[name] {
			t.Errorf("thread %s: no sample with its raw address", name)
		}
	}
	if got := tg.Ask("s"); !strings.HasPrefix(got, "eintr ") {
		t.Errorf("target says %q", got)
	}
}

func perfProbe() error { return perfsample.Probe(perfsample.Config{Freq: 99}) }

// A child that never started was said so, in one line, by whoever started
// it (sandbox.TryStart): the sampler, whose every walk then fails with
// that line, does not say it again (record on a terminal printed it
// twice, once behind its progress line's clearing).
func TestSamplerSandboxNotStartedSaidOnce(t *testing.T) {
	tg := startBusyAsOther(t)
	sandbox.TestHook = "lockdown"
	defer func() { sandbox.TestHook = "" }()
	tgt, err := sandbox.TargetOf(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	say := func(msg string) { said = append(said, msg) }
	ropts := resolve.Options{Live: true, Sampler: true}
	child := sandbox.TryStart(sandbox.Config{Resolve: ropts}, tgt, fmt.Sprintf("process %d", tg.PID), say)
	t.Cleanup(func() { child.Close() })
	if !child.NeverStarted() {
		t.Fatalf("the child started despite its failing lockdown")
	}
	s, err := New(resolve.NewResolver(symtab.New(symtab.Options{}), ropts),
		Config{Freq: 99, Duration: 300 * time.Millisecond, Idle: true, Source: SourcePtrace, Warn: say,
			Sandbox: func(int) *sandbox.Child { return child }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto, Deadline: time.Now().Add(10 * time.Second)}, child.Check())
	if err != nil {
		t.Fatalf("first capture: %v", err)
	}
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	if end := s.Run(); end != EndDuration {
		t.Fatalf("Run ended with %q", end)
	}
	want := sandbox.NotStartedLine(fmt.Sprintf("process %d", tg.PID), errors.New("test hook: the lockdown fails"))
	if len(said) != 1 || said[0] != want {
		t.Errorf("said %q, want the one line %q", said, want)
	}
	if st := s.Profile().Stats; st.Samples == 0 || st.TruncatedWhy["sandboxed parser failed"] != st.Samples {
		t.Errorf("%d samples, truncated %v: want every sample unnamed", st.Samples, st.TruncatedWhy)
	}
}
