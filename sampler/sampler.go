//go:build linux

// Package sampler is the engine of `stackshot record`: it captures live
// processes at a fixed rate, unwinds each thread's stack, and aggregates the
// stacks into a profile (output.Profile). It notices a target that exits, or
// whose pid comes to name another process, and stops sampling it with a
// warning.
//
// By default it keeps on-CPU samples only (threads in state R), as py-spy
// and perf do: a profile then shows where CPU time goes. With Config.Idle it
// keeps every thread's stack at every tick, a wall-clock profile that also
// shows where threads wait.
//
// Running threads are sampled with perf events where the kernel allows
// them (package perfsample): each thread's own clock event copies its
// registers and the top of its stack while it runs, and no thread is ever
// stopped. A thread that is runnable but waiting for a CPU at a tick is
// counted with its most recent perf sample: it has not run since, so that
// is its stack, taken at most one perf period of its own CPU time before
// it was switched out. Blocked threads (--idle) are read through /proc
// without a stop in both cases. Where perf events are refused (or Config
// asks), each tick stops the running threads with ptrace instead.
package sampler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"stackshot/internal/arch"
	"stackshot/output"
	"stackshot/perfsample"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
	"stackshot/unwind"
)

// Config says what to sample, how often and for how long.
type Config struct {
	Freq     int           // samples per second, 1 to MaxFreq
	Duration time.Duration // how long to sample
	// Deadline, when set, ends sampling early: the command's own bound.
	Deadline time.Time
	// Capture is each tick's capture: Mode, Consistent, StackBytes,
	// Kernel, TIDs and Cancel are used as given; Deadline, Reuse, Cache
	// and RefreshMaps are the sampler's. Closing Cancel ends the run.
	Capture ptrace.Options
	// CaptureTimeout bounds one tick's capture of one process.
	CaptureTimeout time.Duration
	Kernel         bool // kernel frames are part of a stack
	Idle           bool // also keep threads that are not running
	// Warn receives one line per target lost (exited, pid reused).
	Warn func(msg string)
	// Progress is called about four times a second.
	Progress func(Progress)
	// Identity returns what tells a process from a later one with the same
	// pid (nil: its start time, field 22 of /proc/PID/stat).
	Identity func(pid int) (uint64, error)
	// Source says how running threads are sampled.
	Source Source
	// Sandbox returns the sandboxed child that parses process pid's bytes
	// (see package sandbox), or nil (also when Sandbox is nil): then they
	// are parsed in-process.
	Sandbox func(pid int) *sandbox.Child
	// NoPython leaves the Python frames of CPython programs out.
	NoPython bool
}

// Source is how running threads are sampled.
type Source int

const (
	SourceAuto   Source = iota // perf events where the kernel allows them, else ptrace stops
	SourcePerf                 // perf events, or fail
	SourcePtrace               // ptrace stops
)

var sourceNames = []string{SourceAuto: "auto", SourcePerf: "perf", SourcePtrace: "ptrace"}

// Set reads a --sampler value: auto, perf or ptrace (Source is a flag value).
func (s *Source) Set(v string) error {
	for i, name := range sourceNames {
		if v == name {
			*s = Source(i)
			return nil
		}
	}
	return errors.New("want auto, perf or ptrace")
}

func (s *Source) String() string { return sourceNames[*s] }
func (s *Source) Type() string   { return "sampler" }

// MaxFreq is the highest sampling frequency.
const MaxFreq = 10000

// Progress is what a progress line shows.
type Progress struct {
	Elapsed, Duration time.Duration
	Ticks, Samples    int64
	Threads           int
}

// End says why sampling ended.
type End int

const (
	EndDuration    End = iota // the whole duration ran
	EndDeadline               // Config.Deadline came first
	EndInterrupted            // Capture.Cancel was closed
	EndExited                 // no target is left (exited, or pid reused)
)

func (e End) String() string {
	switch e {
	case EndDeadline:
		return "stopped at the timeout"
	case EndInterrupted:
		return "interrupted"
	case EndExited:
		return "every target exited"
	}
	return "done"
}

// ErrGone means a process to add is no longer there.
var ErrGone = errors.New("process is gone")

// Sampler samples a set of processes. Use it from one goroutine.
type Sampler struct {
	cfg     Config
	res     *resolve.Resolver
	targets []*target
	cache   *procmaps.TaskCache
	agg     aggregator
	hist    pauseHist
	stats   output.Stats
	start   time.Time
	elapsed time.Duration
	end     End
	// usePerf: running threads are sampled with perf events; perfWhy says
	// why not, when they could not be.
	usePerf bool
	perfWhy string
	perfCfg perfsample.Config
	tids    []int        // a target's user threads, this tick
	live    map[int]bool // the same, as a set
	lost    int64        // perf samples dropped, of targets since closed
	// batch is a target's threads of this tick to unwind (one round trip
	// to a sandboxed child), each with its weight.
	batch []pending
	ptrs  []*ptrace.Thread
}

type pending struct {
	th ptrace.Thread
	w  int64
}

// methodPerf marks a thread whose registers and stack are a perf sample's.
const methodPerf = "perf"

// target is one process being sampled.
type target struct {
	pid      int
	identity uint64 // start time: a pid reused by another process differs
	last     *ptrace.Process
	parse    parser // in-process or in the target's sandboxed child
	mapsAt   time.Time
	stale    bool // a PC fell outside the known maps: read them again
	gone     bool
	comm     string
	exe      string
	tids     map[int]bool
	perf     *perfsample.Set     // nil: running threads are stopped
	latest   map[int]*perfThread // each thread's most recent perf samples
	// pyOpened says whether its CPython interpreter was looked for.
	pyOpened bool
}

// maxCatchUp is how many of a thread's perf samples are kept between
// ticks; maxLate bounds how late a tick may be and still stand for the
// instants it missed (when every target is sampled with perf events);
// later than that, they are skipped, as with ptrace stops.
const (
	maxCatchUp = 8
	maxLate    = 250 * time.Millisecond
)

// perfThread keeps a thread's most recent perf samples, in buffers reused
// from sample to sample.
type perfThread struct {
	held  [maxCatchUp]heldSample // a ring: next is where the next one goes
	next  int
	count int  // samples kept
	fresh int  // samples taken since the previous tick (at most maxCatchUp)
	wasR  bool // the thread was running or runnable at the previous tick
}

type heldSample struct {
	regs  [arch.UserRegsCount]uint64
	stack []byte
}

// recent returns the i-th most recent sample (0: the latest).
func (pt *perfThread) recent(i int) *heldSample {
	return &pt.held[(pt.next-1-i+2*maxCatchUp)%maxCatchUp]
}

// New returns a Sampler that unwinds and names frames with res.
func New(res *resolve.Resolver, cfg Config) (*Sampler, error) {
	if cfg.Freq <= 0 || cfg.Freq > MaxFreq {
		return nil, fmt.Errorf("frequency %d: want 1 to %d samples per second", cfg.Freq, MaxFreq)
	}
	if cfg.Duration <= 0 {
		return nil, fmt.Errorf("duration %v: want a positive duration", cfg.Duration)
	}
	if cfg.CaptureTimeout <= 0 {
		cfg.CaptureTimeout = 10 * time.Second
	}
	if cfg.Identity == nil {
		cfg.Identity = StartTime
	}
	s := &Sampler{cfg: cfg, res: res, cache: procmaps.NewTaskCache(), live: map[int]bool{},
		agg: aggregator{idx: map[string]int{}}, stats: output.Stats{TruncatedWhy: map[string]int64{}}}
	s.perfCfg = perfsample.Config{Freq: cfg.Freq, StackBytes: min(cfg.Capture.StackBytes, perfsample.MaxStackBytes)}
	stops := cfg.Capture.Mode == ptrace.ModeStop || cfg.Capture.Consistent
	switch {
	case cfg.Source == SourcePtrace:
		s.perfWhy = "asked for"
	case stops && cfg.Source == SourcePerf:
		return nil, fmt.Errorf("--sampler perf with --mode stop or --consistent: perf events stop no thread")
	case stops:
		s.perfWhy = "stops asked for"
	case cfg.Source == SourcePerf:
		s.usePerf = true // Add fails if the kernel refuses
	default:
		if err := perfsample.Probe(s.perfCfg); err != nil {
			s.perfWhy = "perf events refused: " + err.Error()
		} else {
			s.usePerf = true
		}
	}
	return s, nil
}

// Perf reports whether running threads are to be sampled with perf
// events, not stopped: the caller's first capture then stops none either.
func (s *Sampler) Perf() bool { return s.usePerf }

// StartTime is a process's start time in clock ticks after boot (field 22
// of /proc/PID/stat): with the pid, it names one process for its lifetime.
func StartTime(pid int) (uint64, error) {
	st, err := procmaps.ReadProcStat(pid)
	if err != nil {
		return 0, err
	}
	return st.StartTime, nil
}

// Add adds a process from a first capture of it, which the caller took (and
// whose failure it explained). The first capture is symbolized at once, so
// loading CFI, symbols and debug info does not eat the first ticks.
func (s *Sampler) Add(p *ptrace.Process) error {
	id, err := s.cfg.Identity(p.PID)
	if err != nil {
		return fmt.Errorf("process %d: %w (%v)", p.PID, ErrGone, err)
	}
	t := &target{pid: p.PID, identity: id, last: p,
		comm: p.Comm, exe: p.Exe, mapsAt: time.Now(), tids: map[int]bool{}}
	if s.usePerf {
		set, err := perfsample.Open(p.PID, s.userTIDs(p), s.perfCfg)
		switch {
		case err == nil:
			t.perf, t.latest = set, map[int]*perfThread{}
		case errors.Is(err, syscall.ESRCH):
			// Its threads are gone: so is the process, not perf events.
			return fmt.Errorf("process %d: %w (%w)", p.PID, ErrGone, err)
		case s.cfg.Source == SourcePerf:
			return fmt.Errorf("process %d: sampling with perf events: %w", p.PID, err)
		default:
			s.perfWhy = "perf events refused: " + err.Error()
		}
	}
	if child := s.sandboxFor(p.PID); child != nil {
		t.parse = newBoxed(child, s.res, s.cfg.Warn)
	} else {
		t.parse = newInProcess(s.res, p)
	}
	t.parse.warm(p)
	s.targets = append(s.targets, t)
	return nil
}

// userTIDs lists p's threads that are not kernel threads.
func (s *Sampler) userTIDs(p *ptrace.Process) []int {
	s.tids = s.tids[:0]
	for i := range p.Threads {
		if !p.Threads[i].Kernel {
			s.tids = append(s.tids, p.Threads[i].TID)
		}
	}
	return s.tids
}

// Close releases the /proc files kept open across ticks, and the perf
// events.
func (s *Sampler) Close() {
	s.cache.Close()
	for _, t := range s.targets {
		s.closePerf(t)
	}
}

func (s *Sampler) closePerf(t *target) {
	if t.perf != nil {
		s.lost += int64(t.perf.Lost)
		t.perf.Close()
		t.perf = nil
	}
}

// Run samples until the duration is over, the deadline comes, Cancel is
// closed, or no target is left, and says which.
func (s *Sampler) Run() End {
	period := time.Second / time.Duration(s.cfg.Freq)
	s.start = time.Now()
	stop, atEnd := s.start.Add(s.cfg.Duration), EndDuration
	if d := s.cfg.Deadline; !d.IsZero() && d.Before(stop) {
		stop, atEnd = d, EndDeadline
	}
	s.end = atEnd
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastShow time.Time
	for n := int64(0); ; n++ {
		due := s.start.Add(time.Duration(n) * period)
		if !due.Before(stop) {
			break
		}
		cover := 1
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-s.cfg.Capture.Cancel:
			}
		} else if -d > period {
			cur := int64(time.Since(s.start) / period)
			if !s.allPerf() || time.Duration(cur-n)*period > maxLate {
				// Late by more than a period: skip to the current slot
				// rather than bunching samples (the schedule never
				// drifts).
				n = cur
				continue
			}
			// Every target is sampled with perf events: the kernel went
			// on sampling while this tick was late, so it stands for the
			// instants it missed too.
			cover = int(cur-n) + 1
			n = cur
			if !s.start.Add(time.Duration(n) * period).Before(stop) {
				break
			}
		}
		if s.cancelled() {
			s.end = EndInterrupted
			break
		}
		s.stats.Ticks += int64(cover)
		s.stats.CaughtUp += int64(cover - 1)
		if s.tick(cover) == 0 {
			s.end = EndExited
			break
		}
		if s.cfg.Progress != nil && time.Since(lastShow) > 250*time.Millisecond {
			lastShow = time.Now()
			s.cfg.Progress(Progress{Elapsed: time.Since(s.start), Duration: s.cfg.Duration,
				Ticks: s.stats.Ticks, Samples: s.stats.Samples, Threads: s.threads()})
		}
	}
	s.elapsed = time.Since(s.start)
	s.elapsed = min(s.elapsed, max(stop.Sub(s.start), 0))
	return s.end
}

func (s *Sampler) cancelled() bool {
	select {
	case <-s.cfg.Capture.Cancel:
		return true
	default:
		return false
	}
}

// allPerf reports whether every live target is sampled with perf events.
func (s *Sampler) allPerf() bool {
	for _, t := range s.targets {
		if !t.gone && t.perf == nil {
			return false
		}
	}
	return true
}

// tick samples every live target once, for cover sampling instants, and
// returns how many are left.
func (s *Sampler) tick(cover int) int {
	live := 0
	for _, t := range s.targets {
		if !t.gone && s.sample(t, cover) {
			live++
		}
	}
	return live
}

// sample captures one target and aggregates its threads' stacks, for
// cover instants; false when the target is gone.
func (s *Sampler) sample(t *target, cover int) bool {
	if !s.same(t) {
		return false
	}
	opt := s.cfg.Capture
	opt.Deadline = time.Now().Add(s.cfg.CaptureTimeout)
	if d := s.cfg.Deadline; !d.IsZero() && d.Before(opt.Deadline) {
		opt.Deadline = d
	}
	opt.Reuse = t.last
	opt.Cache = s.cache
	if t.perf != nil {
		// Running threads come from their perf samples: stop none.
		opt.Mode, opt.Consistent = ptrace.ModeNoStop, false
	}
	opt.RefreshMaps = t.stale || time.Since(t.mapsAt) > time.Second
	if opt.RefreshMaps {
		t.mapsAt, t.stale = time.Now(), false
	}
	t.parse.prepare(t.last)
	check, checkAll := t.parse.checks()
	opt.CheckAll = checkAll
	p, err := ptrace.Capture(t.pid, opt, check)
	if err != nil || ((p.State == "Z" || p.State == "X") && p.MemTID == 0) || len(p.Threads) == 0 {
		if s.cancelled() {
			// Not gone: the run ends on this tick (a capture the signal
			// cut short has read no thread).
			return true
		}
		if err == nil && len(p.Threads) == 0 && p.State != "Z" && p.State != "X" {
			return s.same(t) // still there: a tick that read no thread
		}
		s.lose(t, "exited")
		return false
	}
	if !s.same(t) {
		return false // the pid went to another process during the capture: not its stacks
	}
	if opt.RefreshMaps && slices.Equal(p.Maps, t.last.Maps) {
		// The same maps: the same files, whose modules, tables and build
		// ids are kept.
		p.Maps, p.BuildIDs, p.VDSO = t.last.Maps, t.last.BuildIDs, t.last.VDSO
	}
	if p.BuildIDs == nil {
		t.parse.images(p)
	}
	t.last = p
	if t.perf != nil {
		s.readPerf(t, p)
	}
	for i := range p.Threads {
		th := &p.Threads[i]
		if th.Kernel {
			continue
		}
		switch {
		case t.perf != nil && onCPU(th) && th.Method != ptrace.MethodNoStop:
			s.perfThread(t, p, th, cover)
		case th.Reused:
			// Blocked, and it has not run since the previous tick: it
			// was so at every instant this tick stands for.
			s.thread(t, th, int64(cover))
		default:
			s.thread(t, th, 1)
		}
		if pt := t.latest[th.TID]; pt != nil && !onCPU(th) {
			// Not running now: what it was sampled doing is over.
			pt.wasR, pt.fresh = false, 0
		}
	}
	s.flush(t, p)
	return true
}

// same checks that t's pid still names the process first sampled.
func (s *Sampler) same(t *target) bool {
	id, err := s.cfg.Identity(t.pid)
	if err != nil {
		s.lose(t, "exited")
		return false
	}
	if id != t.identity {
		s.lose(t, "exited, and its pid now names another process; stopped sampling it")
		return false
	}
	return true
}

// readPerf follows p's threads with perf events (new ones opened, exited
// ones closed) and keeps each thread's most recent sample.
func (s *Sampler) readPerf(t *target, p *ptrace.Process) {
	t.perf.Sync(s.userTIDs(p))
	clear(s.live)
	for _, tid := range s.tids {
		s.live[tid] = true
	}
	for tid := range t.latest {
		if !s.live[tid] {
			delete(t.latest, tid)
		}
	}
	t.perf.Read(func(smp *perfsample.Sample) {
		if !smp.HasRegs || !s.live[smp.TID] {
			return
		}
		pt := t.latest[smp.TID]
		if pt == nil {
			pt = &perfThread{}
			t.latest[smp.TID] = pt
		}
		h := &pt.held[pt.next]
		h.regs = smp.Regs
		h.stack = append(h.stack[:0], smp.Stack...)
		pt.next = (pt.next + 1) % maxCatchUp
		pt.count = min(pt.count+1, maxCatchUp)
		pt.fresh = min(pt.fresh+1, maxCatchUp)
	})
}

// perfThread adds a running thread's stacks from its perf samples, for
// the cover instants this tick stands for (1 unless it came late): each
// sample the kernel took since the previous tick counts once, at most
// cover; the instants left are counted with its latest sample if it was
// already running or runnable at the previous tick (it has not run since
// that sample, or ran without being sampled: waiting for a CPU), or once
// if it has no fresh sample at all. A thread without any perf sample yet
// (just started, or running only in the kernel) is left out and counted:
// there is no stack to show for it.
func (s *Sampler) perfThread(t *target, p *ptrace.Process, th *ptrace.Thread, cover int) {
	pt := t.latest[th.TID]
	if pt == nil || pt.count == 0 {
		t.tids[th.TID] = true
		s.stats.PerfNone++
		return
	}
	fresh := min(pt.fresh, cover, pt.count)
	pad := 0
	switch {
	case fresh == 0:
		pad = 1
		if pt.wasR {
			pad = cover
		}
	case fresh < cover && pt.wasR:
		pad = cover - fresh
	}
	pt.fresh, pt.wasR = 0, true
	th.Method, th.Err, th.Outcome = methodPerf, "", ptrace.OutcomeCaptured
	for i := fresh - 1; i >= 0; i-- { // oldest first
		s.fromPerf(t, p, th, pt.recent(i))
		s.thread(t, th, 1)
	}
	if pad > 0 {
		s.stats.PerfHeld += int64(pad)
		s.fromPerf(t, p, th, pt.recent(0))
		s.thread(t, th, int64(pad))
	}
}

// fromPerf gives a thread the registers and stack of a perf sample.
func (s *Sampler) fromPerf(t *target, p *ptrace.Process, th *ptrace.Thread, h *heldSample) {
	sp := h.regs[arch.UserRSP]
	th.Regs, th.StackAddr, th.Stack = h.regs[:], sp, h.stack
	th.StackLo, th.StackHi = 0, 0
	if m, ok := procmaps.Maps(p.Maps).Find(sp); ok {
		th.StackLo, th.StackHi = m.Start, m.End
	} else {
		t.stale = true // a stack mapped since the maps were read
	}
}

func (s *Sampler) lose(t *target, why string) {
	t.gone = true
	s.closePerf(t)
	if s.cfg.Warn != nil {
		s.cfg.Warn(fmt.Sprintf("process %d %s after %s", t.pid, why, time.Since(s.start).Round(time.Millisecond)))
	}
}

// onCPU reports whether a thread was running (or runnable) when captured.
func onCPU(th *ptrace.Thread) bool { return th.State == "R" }

// thread adds one thread's stack, w times.
func (s *Sampler) thread(t *target, th *ptrace.Thread, w int64) {
	t.tids[th.TID] = true
	if !s.cfg.Idle && !onCPU(th) {
		s.stats.OffCPU++
		return
	}
	switch th.Method {
	case ptrace.MethodPtrace:
		s.stats.Stopped += w
		s.hist.add(th.PauseNS)
	case ptrace.MethodNoStop:
		s.stats.NoStop += w
	case methodPerf:
		s.stats.NoStop += w
		s.stats.Perf += w
	default:
		s.stats.ProcOnly += w
	}
	s.batch = append(s.batch, pending{th: *th, w: w})
}

// flush unwinds the threads of the tick's capture p of t that thread
// kept (in one go: one round trip to a sandboxed child) and adds their
// stacks.
func (s *Sampler) flush(t *target, p *ptrace.Process) {
	if len(s.batch) == 0 {
		return
	}
	s.ptrs = s.ptrs[:0]
	for i := range s.batch {
		s.ptrs = append(s.ptrs, &s.batch[i].th)
	}
	maps := procmaps.Maps(p.Maps)
	s.openPython(t, p)
	t.parse.walk(p, s.ptrs, func(i int, fr []unwind.Frame, stop unwind.StopReason, ok bool, failed string, pt *pyruntime.Thread) {
		th, w := s.ptrs[i], s.batch[i].w
		switch {
		case failed != "":
			s.stats.Truncated += w
			s.stats.TruncatedWhy["sandboxed parser failed"] += w
		case ok && !stop.Complete():
			s.stats.Truncated += w
			s.stats.TruncatedWhy[stop.String()] += w
		case !ok:
			s.stats.Truncated += w
			s.stats.TruncatedWhy["no registers"] += w
		}
		for _, f := range fr {
			if _, ok := maps.Find(f.PC); !ok {
				t.stale = true // (the maps may be stale)
			}
		}
		s.agg.key = stackKey(s.agg.key[:0], t.pid, th, fr, s.cfg.Kernel)
		if pt != nil {
			s.agg.key = pyruntime.AppendKey(s.agg.key, pt)
		}
		s.stats.Samples += w
		s.agg.add(s.agg.key, w, func() output.Sample {
			frames := t.parse.frames(th, fr, ok)
			if pt != nil {
				rt := report.Thread{Frames: frames}
				pyruntime.Inline(&rt, pt)
				frames = rt.Frames
			}
			return output.Sample{PID: t.pid, TID: th.TID, Thread: th.Name, Frames: frames}
		})
	})
	clear(s.batch) // (no stack copies kept past the tick)
	s.batch = s.batch[:0]
}

// openPython looks for t's CPython interpreter, once (in capture p's
// maps), unless Config.NoPython: its parser then gives each walked
// thread's Python frames, read in-process or in t's sandboxed child
// alike. One that cannot be read is said once.
func (s *Sampler) openPython(t *target, p *ptrace.Process) {
	if t.pyOpened || s.cfg.NoPython {
		return
	}
	t.pyOpened = true
	// (the executable whatever its name, looked into once per target: a
	// python under another name, a program with CPython linked in)
	cands := pyruntime.Candidates(p.Exe, p.Maps, map[string]bool{p.Exe: true})
	if len(cands) == 0 {
		return
	}
	if _, err := t.parse.python(p, procmaps.Identity{PID: t.pid, StartTime: t.identity}, cands); err != nil && s.cfg.Warn != nil {
		s.cfg.Warn(fmt.Sprintf("process %d: Python frames not recorded (%v)", t.pid, err))
	}
}

// sandboxFor is the child that parses process pid's bytes, or nil.
func (s *Sampler) sandboxFor(pid int) *sandbox.Child {
	if s.cfg.Sandbox == nil {
		return nil
	}
	return s.cfg.Sandbox(pid)
}

func (s *Sampler) threads() int {
	n := 0
	for _, t := range s.targets {
		n += len(t.tids)
	}
	return n
}

// Profile returns what Run gathered.
func (s *Sampler) Profile() *output.Profile {
	st := s.stats
	if s.elapsed > 0 {
		st.AchievedHz = float64(st.Ticks) / s.elapsed.Seconds()
	}
	st.Threads = s.threads()
	st.PauseMedUS = s.hist.quantile(0.5)
	st.PauseP99US = s.hist.quantile(0.99)
	st.PauseMaxUS = float64(s.hist.maxNS) / 1000
	st.Exited = s.end == EndExited
	st.UniqueStacks = uniqueStacks(s.agg.samples)
	st.Sampler, st.SamplerWhy = "ptrace", s.perfWhy
	st.PerfLost = s.lost
	for _, t := range s.targets {
		if t.latest != nil { // perf events were opened on it
			st.Sampler = "perf"
		}
		if t.perf != nil {
			st.PerfLost += int64(t.perf.Lost)
			var notes []string
			if t.perf.UserOnly() {
				notes = append(notes, "kernel profiling refused: a thread is sampled only while it runs user code")
			}
			if n := t.perf.Unopened(); n > 0 {
				notes = append(notes, fmt.Sprintf("%d threads of process %d got no event (%v): they are left out while running",
					n, t.pid, t.perf.Err))
			}
			if len(notes) > 0 {
				st.SamplerWhy = strings.Join(notes, "; ")
			}
		}
	}
	p := &output.Profile{Start: s.start, Duration: s.elapsed, FreqHz: s.cfg.Freq, OffCPU: s.cfg.Idle,
		Samples: s.agg.samples, Stats: st}
	for _, t := range s.targets {
		p.Processes = append(p.Processes, output.ProfileProcess{PID: t.pid, Comm: t.comm, Exe: t.exe})
	}
	return p
}

// aggregator deduplicates stacks: a stack seen before costs a map lookup,
// so memory grows with distinct stacks, not with samples.
type aggregator struct {
	idx     map[string]int
	samples []output.Sample
	key     []byte
}

func (a *aggregator) add(key []byte, w int64, make func() output.Sample) {
	if i, ok := a.idx[string(key)]; ok {
		a.samples[i].Count += w
		return
	}
	s := make()
	s.Count = w
	a.idx[string(key)] = len(a.samples)
	a.samples = append(a.samples, s)
}

// stackKey identifies a thread's stack for aggregation: pid, thread name,
// kernel frames (by name) and user PCs.
func stackKey(b []byte, pid int, th *ptrace.Thread, fr []unwind.Frame, kernel bool) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(pid))
	b = append(b, th.Name...)
	b = append(b, 0)
	if kernel {
		for _, k := range th.KernelStack {
			b = append(b, k.Function...)
			b = binary.LittleEndian.AppendUint64(b, k.Offset^k.Addr)
			b = append(b, 0)
		}
	}
	b = append(b, 1)
	if len(fr) == 0 && th.Syscall != nil {
		b = binary.LittleEndian.AppendUint64(b, th.Syscall.PC)
	}
	for _, f := range fr {
		pc := f.PC
		if f.Exact {
			pc |= 1 << 63
		}
		b = binary.LittleEndian.AppendUint64(b, pc)
	}
	return b
}

// uniqueStacks counts distinct stacks across threads, as the outputs show
// them: by function (module and offset when unnamed), whatever the thread.
func uniqueStacks(samples []output.Sample) int {
	seen := map[string]bool{}
	var b []byte
	for i := range samples {
		b = binary.LittleEndian.AppendUint32(b[:0], uint32(samples[i].PID))
		for j := range samples[i].Frames {
			b = frameKey(b, &samples[i].Frames[j])
		}
		seen[string(b)] = true
	}
	return len(seen)
}

func frameKey(b []byte, f *report.Frame) []byte {
	b = append(b, f.Kind...)
	b = append(b, 0)
	if f.Function != "" {
		b = append(b, f.Function...)
	} else {
		b = append(b, f.Module...)
		b = binary.LittleEndian.AppendUint64(b, f.ModuleOffset)
	}
	return append(b, 0)
}
