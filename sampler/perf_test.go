//go:build linux

package sampler

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/output"
	"stackshot/perfsample"
)

// needPerf skips where this kernel refuses perf events (a container
// without CAP_PERFMON): the fallback is tested apart.
func needPerf(t *testing.T) {
	t.Helper()
	if err := perfsample.Probe(perfsample.Config{Freq: 99}); err != nil {
		testutil.Skip(t, "perf events refused here: "+err.Error())
	}
}

// chains gives each thread name's stacks as function chains, innermost
// first, with their counts.
func chains(p *output.Profile) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for _, smp := range p.Samples {
		var fns []string
		for _, f := range smp.Frames {
			fns = append(fns, f.Function)
		}
		if out[smp.Thread] == nil {
			out[smp.Thread] = map[string]int64{}
		}
		out[smp.Thread][strings.Join(fns, " <- ")] += smp.Count
	}
	return out
}

// checkChain asserts every stack of thread name starts with want (innermost
// first) and goes on to the thread's root.
func checkChain(t *testing.T, ch map[string]map[string]int64, name string, want ...string) {
	t.Helper()
	if len(ch[name]) == 0 {
		t.Errorf("thread %s: no sample (threads: %v)", name, mapKeys(ch))
		return
	}
	prefix := strings.Join(want, " <- ") + " <- start_thread"
	for chain, n := range ch[name] {
		if !strings.HasPrefix(chain, prefix) {
			t.Errorf("thread %s: %d samples of %q, want %q...", name, n, chain, prefix)
		}
	}
}

func mapKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Five busy threads on a smaller machine, each in functions of its own:
// with perf events every one is sampled with its exact chain, and no
// thread is ever stopped: the summary counts no stop, and the threads
// blocked in system calls that count EINTR saw none.
func TestSamplerPerfNoStop(t *testing.T) {
	needPerf(t)
	tg := testutil.Start(t, buildTarget(t, "blocked"), "spin", "busy")
	// (2 s: on a loaded machine, each busy thread is to run the 10 ms of
	// CPU time of its first sample)
	s, warnings := newSampler(t, tg.PID, Config{Duration: 2 * time.Second, Source: SourcePerf})
	if !s.Perf() {
		t.Fatal("sampler with SourcePerf does not use perf events")
	}
	if end := s.Run(); end != EndDuration {
		t.Fatalf("Run ended with %q", end)
	}
	p := s.Profile()
	st := p.Stats
	if st.Sampler != "perf" || st.Stopped != 0 || st.Perf == 0 || st.PauseMaxUS != 0 {
		t.Errorf("sampler %q, %d stopped (max pause %vus), %d from perf: want perf, no stop", st.Sampler, st.Stopped, st.PauseMaxUS, st.Perf)
	}
	ch := chains(p)
	checkChain(t, ch, "spinner", "spin_c", "spin_b", "spin_a", "start")
	for _, k := range []string{"0", "1", "2", "3"} {
		checkChain(t, ch, "busy-"+k, "busy"+k+"_b", "busy"+k+"_a", "start")
	}
	for _, blocked := range []string{"reader", "condwait", "sleeper", "epoller", "recver", "sigwaiter"} {
		if len(ch[blocked]) != 0 {
			t.Errorf("on-CPU profile has samples of %s, blocked: %v", blocked, ch[blocked])
		}
	}
	if got := tg.Ask("s"); got != "eintr read=0 cond=0 sleep=0 epoll=0 recv=0 sigwait=0" {
		t.Errorf("target says %q: a blocked call was interrupted", got)
	}
	if len(*warnings) != 0 {
		t.Errorf("warnings: %q", *warnings)
	}
}

// Forced to ptrace, the sampler stops running threads as before and says
// why; the chains are the same.
func TestSamplerPtraceFallback(t *testing.T) {
	tg := testutil.Start(t, buildTarget(t, "blocked"), "spin", "busy")
	s, _ := newSampler(t, tg.PID, Config{Duration: 500 * time.Millisecond, Source: SourcePtrace, Idle: true})
	if s.Perf() {
		t.Fatal("sampler with SourcePtrace uses perf events")
	}
	s.Run()
	p := s.Profile()
	st := p.Stats
	if st.Sampler != "ptrace" || st.SamplerWhy != "asked for" || st.Stopped == 0 || st.Perf != 0 {
		t.Errorf("sampler %q (%q), %d stopped, %d from perf: want ptrace stops", st.Sampler, st.SamplerWhy, st.Stopped, st.Perf)
	}
	ch := chains(p)
	checkChain(t, ch, "spinner", "spin_c", "spin_b", "spin_a", "start")
	for _, k := range []string{"0", "1", "2", "3"} {
		checkChain(t, ch, "busy-"+k, "busy"+k+"_b", "busy"+k+"_a", "start")
	}
	if len(ch["reader"]) == 0 {
		t.Errorf("wall-clock profile lacks the blocked reader: %v", mapKeys(ch))
	}
}

// A thread started after sampling began is followed with perf events, and
// one that exits has its event closed.
func TestSamplerPerfNewAndExitedThread(t *testing.T) {
	needPerf(t)
	tg := testutil.Start(t, buildTarget(t, "blocked"))
	progress := make(chan time.Duration, 100)
	s, _ := newSampler(t, tg.PID, Config{Duration: 4 * time.Second, Source: SourcePerf,
		Progress: func(p Progress) {
			select {
			case progress <- p.Elapsed:
			default:
			}
		}})
	done := make(chan End)
	go func() { done <- s.Run() }()
	<-progress
	if got := tg.Ask("b"); got != "late on" {
		t.Fatalf("target says %q to b", got)
	}
	// Let the new thread be sampled for two seconds of the run.
	for start := <-progress; ; {
		if el := <-progress; el-start > 2*time.Second {
			break
		}
	}
	if got := tg.Ask("e"); got != "late off" {
		t.Fatalf("target says %q to e", got)
	}
	if end := <-done; end != EndDuration {
		t.Fatalf("Run ended with %q", end)
	}
	// Until its first perf sample, a new running thread is left out (and
	// counted): no stack without frames.
	p := s.Profile()
	if p.Stats.ProcOnly != 0 {
		t.Errorf("%d samples from /proc only", p.Stats.ProcOnly)
	}
	checkChain(t, chains(p), "late", "late_b", "late_a", "late_start")
	live := len(testutil.ThreadStates(tg.PID))
	if n := s.targets[0].perf.Threads(); n != live {
		t.Errorf("%d perf events open after the late thread exited, want one per live thread: %d", n, live)
	}
}

// A tick that came late stands for the instants it missed when perf
// events sample: a busy thread, running or runnable throughout, counts
// once per instant (its samples the kernel took meanwhile, then its
// latest); a blocked thread that has not run counts once per instant; one
// that has run, once.
func TestSamplerPerfLateTick(t *testing.T) {
	needPerf(t)
	tg := testutil.Start(t, buildTarget(t, "blocked"), "spin", "busy")
	s, _ := newSampler(t, tg.PID, Config{Duration: time.Second, Source: SourcePerf, Idle: true})
	s.start = time.Now()
	busy := []string{"spinner", "busy-0", "busy-1", "busy-2", "busy-3"}
	counts := func() map[string]int64 {
		c := map[string]int64{}
		for _, smp := range s.Profile().Samples {
			c[smp.Thread] += smp.Count
		}
		return c
	}
	// Tick until every busy thread has had a perf sample (a thread is left
	// out until then).
	for end := time.Now().Add(20 * time.Second); ; {
		if s.tick(1) != 1 {
			t.Fatal("target lost")
		}
		c, all := counts(), true
		for _, name := range busy {
			all = all && c[name] > 0
		}
		if all {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("busy threads not all sampled in 20s: %v", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := counts()
	covers := []int{1, 4, 2}
	total := 0
	for _, c := range covers {
		time.Sleep(20 * time.Millisecond) // (lets the kernel take samples between ticks)
		if s.tick(c) != 1 {
			t.Fatal("target lost")
		}
		total += c
	}
	delta := counts()
	for name := range delta {
		delta[name] -= before[name]
	}
	for _, name := range busy {
		if delta[name] != int64(total) {
			t.Errorf("busy thread %s: %d samples, want one per instant: %d", name, delta[name], total)
		}
	}
	t.Logf("samples per thread over %d instants: %v", total, delta)
	for _, name := range []string{"reader", "condwait", "epoller"} {
		if n := delta[name]; n < int64(len(covers)) || n > int64(total) {
			t.Errorf("blocked thread %s: %d samples, want %d to %d", name, n, len(covers), total)
		}
	}
}
