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
package sampler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"stackshot/output"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
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
}

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
	frames  []unwind.Frame
	start   time.Time
	elapsed time.Duration
	end     End
}

// target is one process being sampled.
type target struct {
	pid      int
	identity uint64 // start time: a pid reused by another process differs
	mem      ptrace.MemReader
	last     *ptrace.Process
	space    *resolve.Space
	mapsAt   time.Time
	stale    bool // a PC fell outside the known maps: read them again
	gone     bool
	comm     string
	exe      string
	tids     map[int]bool
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
	return &Sampler{cfg: cfg, res: res, cache: procmaps.NewTaskCache(),
		agg: aggregator{idx: map[string]int{}}, stats: output.Stats{TruncatedWhy: map[string]int64{}}}, nil
}

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
	t := &target{pid: p.PID, identity: id, mem: ptrace.MemReader{PID: p.MemPID()}, last: p,
		comm: p.Comm, exe: p.Exe, mapsAt: time.Now(), tids: map[int]bool{}}
	t.space = s.res.Space(p, t.mem)
	s.res.Process(p, t.mem)
	s.targets = append(s.targets, t)
	return nil
}

// Close releases the /proc files kept open across ticks.
func (s *Sampler) Close() { s.cache.Close() }

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
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-s.cfg.Capture.Cancel:
			}
		} else if -d > period {
			// Late by more than a period: skip to the current slot rather
			// than bunching samples (the schedule never drifts).
			n = int64(time.Since(s.start) / period)
			continue
		}
		if s.cancelled() {
			s.end = EndInterrupted
			break
		}
		s.stats.Ticks++
		if s.tick() == 0 {
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

// tick samples every live target once and returns how many are left.
func (s *Sampler) tick() int {
	live := 0
	for _, t := range s.targets {
		if !t.gone && s.sample(t) {
			live++
		}
	}
	return live
}

// sample captures one target and aggregates its threads' stacks; false
// when the target is gone.
func (s *Sampler) sample(t *target) bool {
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
	opt.RefreshMaps = t.stale || time.Since(t.mapsAt) > time.Second
	if opt.RefreshMaps {
		t.mapsAt, t.stale = time.Now(), false
	}
	t.space.Update(t.last)
	check := func(p *ptrace.Process, th *ptrace.Thread) bool {
		if p.BuildIDs == nil {
			resolve.CollectImages(p, t.mem)
		}
		t.space.Update(p)
		return t.space.CheckNoStop(th)
	}
	p, err := ptrace.Capture(t.pid, opt, check)
	if err != nil && s.cancelled() {
		return true // not gone: the run ends on this tick
	}
	if err != nil || ((p.State == "Z" || p.State == "X") && p.MemTID == 0) || len(p.Threads) == 0 {
		s.lose(t, "exited")
		return false
	}
	if !s.same(t) {
		return false // the pid went to another process during the capture: not its stacks
	}
	if p.BuildIDs == nil {
		resolve.CollectImages(p, t.mem)
	}
	t.last = p
	t.space.Update(p)
	for i := range p.Threads {
		if th := &p.Threads[i]; !th.Kernel {
			s.thread(t, th)
		}
	}
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

func (s *Sampler) lose(t *target, why string) {
	t.gone = true
	if s.cfg.Warn != nil {
		s.cfg.Warn(fmt.Sprintf("process %d %s after %s", t.pid, why, time.Since(s.start).Round(time.Millisecond)))
	}
}

// onCPU reports whether a thread was running (or runnable) when captured.
func onCPU(th *ptrace.Thread) bool { return th.State == "R" }

// thread adds one thread's stack.
func (s *Sampler) thread(t *target, th *ptrace.Thread) {
	t.tids[th.TID] = true
	if !s.cfg.Idle && !onCPU(th) {
		s.stats.OffCPU++
		return
	}
	switch th.Method {
	case ptrace.MethodPtrace:
		s.stats.Stopped++
		s.hist.add(th.PauseNS)
	case ptrace.MethodNoStop:
		s.stats.NoStop++
	default:
		s.stats.ProcOnly++
	}
	fr, why, ok := t.space.Unwind(th, s.frames[:0])
	s.frames = fr
	if ok && !why.Complete() {
		s.stats.Truncated++
		s.stats.TruncatedWhy[why.String()]++
	} else if !ok {
		s.stats.Truncated++
		s.stats.TruncatedWhy["no registers"]++
	}
	for _, f := range fr {
		if t.space.Missing(f.PC) {
			t.stale = true
		}
	}
	s.agg.key = stackKey(s.agg.key[:0], t.pid, th, fr, s.cfg.Kernel)
	s.stats.Samples++
	s.agg.add(s.agg.key, func() output.Sample {
		return output.Sample{PID: t.pid, TID: th.TID, Thread: th.Name,
			Frames: s.res.Frames(t.space, th, fr, ok, nil)}
	})
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

func (a *aggregator) add(key []byte, make func() output.Sample) {
	if i, ok := a.idx[string(key)]; ok {
		a.samples[i].Count++
		return
	}
	s := make()
	s.Count = 1
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
