//go:build linux

package sampler

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/output"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

func buildTarget(t testing.TB, name string) string {
	return testutil.Build(t, "gcc", []string{testutil.Testdata("targets", name+".c")}, "-O2", "-g", "-pthread")
}

// newSampler returns a sampler of pid (already running) and the warnings
// it gives.
func newSampler(t *testing.T, pid int, cfg Config) (*Sampler, *[]string) {
	t.Helper()
	var warnings []string
	cfg.Warn = func(msg string) { warnings = append(warnings, msg) }
	if cfg.Freq == 0 {
		cfg.Freq = 99
	}
	res := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true})
	s, err := New(res, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	// With perf events, the first capture stops no thread either (as
	// record's).
	mode := ptrace.ModeAuto
	if s.Perf() {
		mode = ptrace.ModeNoStop
	}
	p, err := ptrace.Capture(pid, ptrace.Options{Mode: mode, Deadline: time.Now().Add(10 * time.Second)}, nil)
	if err != nil {
		t.Fatalf("first capture: %v", err)
	}
	resolve.CollectImages(p, ptrace.MemReader{PID: p.MemPID()})
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	return s, &warnings
}

func functions(fr []report.Frame) map[string]bool {
	m := map[string]bool{}
	for _, f := range fr {
		m[f.Function] = true
	}
	return m
}

// A target that exits during the recording ends it, with a warning, and
// what was sampled before is kept.
func TestSamplerTargetExits(t *testing.T) {
	tg := testutil.Start(t, buildTarget(t, "hot"), "1500")
	s, warnings := newSampler(t, tg.PID, Config{Duration: time.Minute})
	if end := s.Run(); end != EndExited {
		t.Fatalf("Run ended with %q, want %q", end, EndExited)
	}
	want := fmt.Sprintf("process %d exited after ", tg.PID)
	if len(*warnings) != 1 || !strings.HasPrefix((*warnings)[0], want) {
		t.Errorf("warnings %q, want one starting %q", *warnings, want)
	}
	p := s.Profile()
	if !p.Stats.Exited {
		t.Errorf("profile does not say every target exited")
	}
	hot := int64(0)
	for _, smp := range p.Samples {
		if functions(smp.Frames)["hot_a"] {
			hot += smp.Count
		}
	}
	if hot == 0 {
		t.Errorf("no sample in hot_a before the exit (%d samples)", p.Stats.Samples)
	}
}

// statField22 reads a process's start time the way proc(5) documents it,
// independently of procmaps.
func statField22(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // f[0] is field 3
	v, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// StartTime is field 22 of /proc/PID/stat, and tells apart two processes
// started apart in time.
func TestStartTimeIdentity(t *testing.T) {
	bin := buildTarget(t, "hot")
	a := testutil.Start(t, bin)
	time.Sleep(50 * time.Millisecond) // start times count 10 ms clock ticks
	b := testutil.Start(t, bin)
	ta, err := StartTime(a.PID)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := StartTime(b.PID)
	if err != nil {
		t.Fatal(err)
	}
	if ta != statField22(t, a.PID) || tb != statField22(t, b.PID) {
		t.Errorf("StartTime %d, %d; /proc/PID/stat field 22 says %d, %d", ta, tb, statField22(t, a.PID), statField22(t, b.PID))
	}
	if ta >= tb {
		t.Errorf("start times %d (first) and %d (50 ms later) do not tell the processes apart", ta, tb)
	}
	a.Stop()
	if _, err := StartTime(a.PID); err == nil {
		t.Errorf("StartTime of an exited and reaped process: no error")
	}
}

// When the pid comes to name another process (its start time changes),
// sampling of it stops with a warning that says so. Reusing a pid cannot be
// forced, so the identity read from the real process is shifted after a
// few ticks, as a new process's would be.
func TestSamplerNoticesPIDReuse(t *testing.T) {
	tg := testutil.Start(t, buildTarget(t, "hot"))
	calls := 0
	identity := func(pid int) (uint64, error) {
		st, err := StartTime(pid)
		if calls++; calls > 5 {
			st += 100 // a process started one second later
		}
		return st, err
	}
	s, warnings := newSampler(t, tg.PID, Config{Duration: time.Minute, Identity: identity})
	if end := s.Run(); end != EndExited {
		t.Fatalf("Run ended with %q, want %q", end, EndExited)
	}
	want := fmt.Sprintf("process %d exited, and its pid now names another process; stopped sampling it", tg.PID)
	if len(*warnings) != 1 || !strings.HasPrefix((*warnings)[0], want) {
		t.Errorf("warnings %q, want one starting %q", *warnings, want)
	}
	if st := testutil.State(tg.PID); st == "" || st == "t" || st == "T" {
		t.Errorf("target state %q after the sampler stopped", st)
	}
	// Identity is read by Add, then before and after each tick's capture
	// (so a process is never stopped, nor its stacks kept, once its pid
	// names another): ticks 1 and 2 sampled, the third found the reuse
	// before its capture. Ticks counts sampling instants: a late tick
	// (a loaded machine) under perf events stands for those it missed,
	// which CaughtUp counts, so the ticks taken are Ticks-CaughtUp.
	st := s.Profile().Stats
	if taken := st.Ticks - st.CaughtUp; taken != 3 || calls != 6 || st.Samples == 0 {
		t.Errorf("%d ticks taken (%d instants, %d caught up), %d identity reads, %d samples; "+
			"want 3 ticks, 6 reads, samples from the first two", taken, st.Ticks, st.CaughtUp, calls, st.Samples)
	}
}

// By default only running threads are sampled; Idle adds the others.
func TestSamplerOnCPUAndIdle(t *testing.T) {
	tg := testutil.Start(t, buildTarget(t, "hot"))
	for _, idle := range []bool{false, true} {
		s, _ := newSampler(t, tg.PID, Config{Duration: 700 * time.Millisecond, Idle: idle})
		if end := s.Run(); end != EndDuration {
			t.Fatalf("idle=%v: Run ended with %q", idle, end)
		}
		p := s.Profile()
		if p.OffCPU != idle {
			t.Errorf("idle=%v: profile OffCPU %v", idle, p.OffCPU)
		}
		threads := map[string]int64{}
		for _, smp := range p.Samples {
			threads[smp.Thread] += smp.Count
		}
		var mainSamples int64
		for name, n := range threads {
			if name != "worker" {
				mainSamples += n
			}
		}
		switch {
		case threads["worker"] == 0:
			t.Errorf("idle=%v: no sample of the running worker: %v", idle, threads)
		case !idle && mainSamples != 0:
			t.Errorf("on-CPU profile has %d samples of the main thread blocked in read: %v", mainSamples, threads)
		case !idle && p.Stats.OffCPU == 0:
			t.Errorf("on-CPU profile counts no thread left out")
		case idle && mainSamples == 0:
			t.Errorf("idle profile lacks the main thread: %v", threads)
		}
	}
}

// Unique stacks are counted across threads: four threads blocked in the
// same place are one stack, the main thread another.
func TestSamplerUniqueStacks(t *testing.T) {
	tg := testutil.Start(t, buildTarget(t, "many"), "4")
	tids, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", tg.PID))
	for _, e := range tids {
		tid, _ := strconv.Atoi(e.Name())
		if !testutil.WaitInSyscall(tg.PID, tid, 5*time.Second) {
			t.Fatalf("thread %d never blocked", tid)
		}
	}
	s, _ := newSampler(t, tg.PID, Config{Duration: 300 * time.Millisecond, Idle: true})
	s.Run()
	p := s.Profile()
	if len(p.Samples) < 5 {
		t.Fatalf("%d samples (per thread name), want at least 5 for 5 threads", len(p.Samples))
	}
	if p.Stats.UniqueStacks != 2 {
		t.Errorf("%d unique stacks, want 2 (w-000..w-003 in pthread_cond_wait, main in read)", p.Stats.UniqueStacks)
	}
}

func TestUniqueStacksIgnoreThread(t *testing.T) {
	fr := []report.Frame{{Kind: "user", Function: "f"}, {Kind: "user", Function: "main"}}
	other := []report.Frame{{Kind: "user", Module: "/bin/x", ModuleOffset: 0x10}, {Kind: "user", Function: "main"}}
	got := uniqueStacks([]output.Sample{
		{PID: 1, Thread: "a", Frames: fr}, {PID: 1, Thread: "b", Frames: fr},
		{PID: 1, Thread: "a", Frames: other}, {PID: 2, Thread: "a", Frames: fr},
	})
	if got != 3 {
		t.Errorf("uniqueStacks = %d, want 3", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Freq: 0, Duration: time.Second}, {Freq: MaxFreq + 1, Duration: time.Second}, {Freq: 99}} {
		if _, err := New(nil, cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}

// A target killed (and reaped) mid-recording: the next tick finds it gone,
// says so, and the run ends with what was sampled before.
func TestSamplerTargetKilled(t *testing.T) {
	tg := testutil.Start(t, buildTarget(t, "hot"))
	var killedAt, caughtUp int64
	cfg := Config{Duration: time.Minute}
	s, warnings := newSampler(t, tg.PID, cfg)
	s.cfg.Progress = func(p Progress) {
		if killedAt == 0 {
			// (A late tick with perf events counts for the instants it
			// missed: CaughtUp says how many of Ticks those are.)
			killedAt, caughtUp = p.Ticks, s.stats.CaughtUp
			tg.Stop() // SIGKILL by pid, and reap
		}
	}
	if end := s.Run(); end != EndExited {
		t.Fatalf("Run ended with %q, want %q", end, EndExited)
	}
	want := fmt.Sprintf("process %d exited after ", tg.PID)
	if len(*warnings) != 1 || !strings.HasPrefix((*warnings)[0], want) {
		t.Errorf("warnings %q, want one starting %q", *warnings, want)
	}
	if st := s.Profile().Stats; killedAt == 0 || st.Ticks-st.CaughtUp != killedAt-caughtUp+1 || st.Samples == 0 {
		t.Errorf("killed after tick %d (%d caught up); %d ticks (%d caught up), %d samples: want one tick more, to find it gone",
			killedAt, caughtUp, st.Ticks, st.CaughtUp, st.Samples)
	}
}
