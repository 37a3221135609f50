//go:build linux

package ptrace

// The process walk: who the process is, which threads it has, and in what
// order they are captured. One thread's stop is in stop_linux.go, the
// no-stop reads in observe_linux.go, the consistent mode in
// consistent_linux.go, memory reads in memory_linux.go.

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/arch"
	"stackshot/procmaps"
)

// ErrNoProcess means the process does not exist: procmaps.ErrNoProcess,
// so callers may test for either name.
var ErrNoProcess = procmaps.ErrNoProcess

// ErrPermission means stackshot may not trace the process.
var ErrPermission = errors.New("permission denied")

// CheckFunc decides whether a no-stop capture of a thread is good enough
// (the unwinder can complete with the registers it has). Returning false
// makes an auto-mode capture stop the thread instead.
type CheckFunc func(p *Process, th *Thread) bool

// BatchCheck is Options.CheckAll: it asks about a batch of threads, and
// the function it returns gives the answers (see Options).
type BatchCheck func(p *Process, ths []*Thread) (answers func() []bool)

// Capture takes a snapshot of every thread of pid.
func Capture(pid int, opt Options, check CheckFunc) (*Process, error) {
	start := time.Now()
	p := &Process{Arch: arch.Host, PID: pid, Time: start.UTC()}
	var err error
	if r := opt.Reuse; r != nil && r.PID == pid {
		err = reuseIdentity(p, r, opt.RefreshMaps)
	} else {
		err = readIdentity(p)
	}
	if err != nil {
		return nil, err
	}
	if p.State == "Z" || p.State == "X" {
		if p.MemTID != 0 {
			p.Warnings = append(p.Warnings, "the main thread has exited; the process lives on in its other threads")
		} else {
			p.Warnings = append(p.Warnings, "process is a zombie: it has exited and waits for its parent to reap it")
		}
	}
	if pid == os.Getpid() {
		// A process cannot ptrace its own threads.
		opt.Mode = ModeNoStop
		p.Warnings = append(p.Warnings, "this is stackshot's own process: its threads are read without ptrace")
	}
	if opt.StackBytes <= 0 {
		opt.StackBytes = DefaultStackBytes
	}
	if opt.StopWait <= 0 {
		opt.StopWait = DefaultStopWait
	}
	c := &capturer{p: p, opt: opt, check: check, seen: map[int]bool{}}
	if opt.Cache == nil {
		// A one-shot capture keeps a thread's files open only while it
		// reads them (the two schedstat reads share one open), and lets
		// them go when done with the thread.
		c.opt.Cache, c.oneShot = procmaps.NewTaskCache(), true
		defer c.opt.Cache.Close()
	}
	if r := opt.Reuse; r != nil && r.PID == pid {
		c.prev = make(map[int]*Thread, len(r.Threads))
		for i := range r.Threads {
			c.prev[r.Threads[i].TID] = &r.Threads[i]
		}
	}
	if p.TracerPid != 0 && opt.Mode != ModeNoStop {
		who := procmaps.Exe(p.TracerPid)
		p.Warnings = append(p.Warnings, fmt.Sprintf("already traced by pid %d (%s): threads are shown from /proc only", p.TracerPid, who))
		c.noTrace = true
	}
	tracers.mu.Lock()
	defer tracers.mu.Unlock()
	c.run()
	c.leftovers()
	if !c.oneShot {
		live := make(map[int]bool, len(p.Threads))
		for _, th := range p.Threads {
			live[th.TID] = true
		}
		opt.Cache.Retain(pid, live)
	}
	p.WallNS = time.Since(start).Nanoseconds()
	return p, nil
}

// forget closes a thread's /proc files once a one-shot capture is done
// reading them.
func (c *capturer) forget(tid int) {
	if c.oneShot {
		c.opt.Cache.Forget(c.p.PID, tid)
	}
}

// reuseIdentity starts a sampler's next tick from its last capture r:
// identity, maps, build ids and vdso carry over; one stat read tells
// whether the process is still there.
func reuseIdentity(p, r *Process, refreshMaps bool) error {
	ps, err := procmaps.ReadProcStat(p.PID)
	if err != nil {
		return ErrNoProcess
	}
	p.Comm, p.Exe, p.Kernel, p.TracerPid = ps.Comm, r.Exe, r.Kernel, r.TracerPid
	p.State = string(ps.State)
	p.Maps, p.BuildIDs, p.VDSO, p.MemTID, p.SharedRoot = r.Maps, r.BuildIDs, r.VDSO, r.MemTID, r.SharedRoot
	if refreshMaps && !p.Kernel {
		if maps, err := readMaps(p); err == nil {
			p.Maps = maps
			p.BuildIDs = nil // the caller collects them again
		}
	}
	return nil
}

// readIdentity reads who process p.PID is, and its maps.
func readIdentity(p *Process) error {
	pid := p.PID
	st, err := procmaps.ReadStatus(pid)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ErrNoProcess
		}
		return err
	}
	if st.Tgid != 0 && st.Tgid != pid {
		return fmt.Errorf("%d is a thread of process %d, not a process: %w", pid, st.Tgid, ErrNoProcess)
	}
	p.Comm = st.Name
	p.State = string(st.State)
	p.TracerPid = st.TracerPid
	p.Exe = procmaps.Exe(pid)
	if ps, err := procmaps.ReadProcStat(pid); err == nil {
		p.Kernel = ps.Flags&procmaps.PF_KTHREAD != 0
		p.Comm = ps.Comm
	}
	if p.State == "Z" || p.State == "X" {
		// The main thread has exited; other threads may live on.
		p.MemTID = liveThread(pid)
		if p.MemTID != 0 {
			p.Exe = procmaps.TaskExe(pid, p.MemTID)
		}
	}
	if p.Kernel {
		return nil
	}
	p.SharedRoot = procmaps.SharesRoot(pid, p.MemTID)
	maps, err := readMaps(p)
	switch {
	case errors.Is(err, os.ErrPermission):
		return ErrPermission
	case errors.Is(err, os.ErrNotExist):
		return ErrNoProcess
	case err != nil:
		return fmt.Errorf("reading maps: %w", err)
	}
	p.Maps = maps
	return nil
}

// liveThread is a thread of pid other than the main one that has not
// exited (0: none).
func liveThread(pid int) int {
	tids, err := procmaps.Tasks(pid)
	if err != nil {
		return 0
	}
	for _, tid := range tids {
		if ts, err := procmaps.ReadStat(pid, tid); err == nil && tid != pid && ts.State != 'Z' && ts.State != 'X' {
			return tid
		}
	}
	return 0
}

// readMaps reads p's maps, through p.MemTID when the main thread is gone.
func readMaps(p *Process) (procmaps.Maps, error) {
	if p.MemTID != 0 {
		return procmaps.ReadTaskMaps(p.PID, p.MemTID)
	}
	return procmaps.ReadMaps(p.PID)
}

type capturer struct {
	p     *Process
	opt   Options
	check CheckFunc
	// verdicts are Options.CheckAll's answers for this round's threads.
	verdicts map[*Thread]bool
	t        *tracer
	seen     map[int]bool
	noTrace  bool
	oneShot  bool            // opt.Cache is this capture's own: see forget
	prev     map[int]*Thread // the previous capture's threads (Options.Reuse)
	// timeouts counts threads that would not stop in this capture.
	timeouts atomic.Int32
	mapsMu   sync.RWMutex // guards p.Maps and mapsAt: observers and the check run in parallel
	mapsAt   time.Time
	// busy holds the CPUs this capture's running threads were seen on:
	// stackshot keeps off them (keepOff).
	busy unix.CPUSet
}

// stayOff adds the CPUs of the running threads of ths to c.busy and keeps
// stackshot's threads off them (not in stackshot's own capture, whose
// running thread is the one capturing).
func (c *capturer) stayOff(ths ...*Thread) {
	if c.p.PID == os.Getpid() {
		return
	}
	for _, th := range ths {
		setBusy(&c.busy, th.State, th.Kernel, th.cpu)
	}
	keepOff(&c.busy)
}

// stayOffRunning is stayOff for every wanted thread of the process, from
// its stat file alone: the stop and consistent modes call it before they
// start their tracer. (A consistent capture adds nothing for threads born
// later: it seizes them while the others are held stopped, and nothing
// but the stops may run then.)
func (c *capturer) stayOffRunning() {
	if c.p.PID == os.Getpid() {
		return
	}
	tids, err := procmaps.Tasks(c.p.PID)
	if err != nil {
		return
	}
	for _, tid := range tids {
		if !c.wanted(tid) {
			continue
		}
		if st, err := c.opt.Cache.ReadStat(c.p.PID, tid); err == nil {
			setBusy(&c.busy, string(st.State), st.Flags&procmaps.PF_KTHREAD != 0, st.Processor)
		}
	}
	keepOff(&c.busy)
}

func (c *capturer) cancelled() bool {
	return c.interrupted() || (!c.opt.Deadline.IsZero() && time.Now().After(c.opt.Deadline))
}

func (c *capturer) interrupted() bool {
	if c.opt.Cancel == nil {
		return false
	}
	select {
	case <-c.opt.Cancel:
		return true
	default:
		return false
	}
}

// leftovers lists, from /proc, the threads the deadline left uncaptured:
// a report never silently drops a thread. Threads end up in task order,
// the main thread first.
func (c *capturer) leftovers() {
	if !c.interrupted() && !c.opt.Deadline.IsZero() && time.Now().After(c.opt.Deadline) {
		have := make(map[int]bool, len(c.p.Threads))
		for _, th := range c.p.Threads {
			have[th.TID] = true
		}
		tids, _ := procmaps.Tasks(c.p.PID)
		for _, tid := range tids {
			if have[tid] || !c.wanted(tid) {
				continue
			}
			th, ok := c.pre(tid)
			c.forget(tid)
			if !ok {
				continue
			}
			th.giveUp(OutcomeDeadline, "not captured before --timeout ran out; shown from /proc")
			c.p.Threads = append(c.p.Threads, th)
		}
	}
	pid := c.p.PID
	sort.SliceStable(c.p.Threads, func(i, j int) bool {
		a, b := c.p.Threads[i].TID, c.p.Threads[j].TID
		if a == pid || b == pid {
			return a == pid && b != pid
		}
		return a < b
	})
}

func (c *capturer) wanted(tid int) bool {
	if len(c.opt.TIDs) == 0 {
		return true
	}
	for _, t := range c.opt.TIDs {
		if t == tid {
			return true
		}
	}
	return false
}

// freshTasks lists the wanted threads not seen before, marking them seen;
// ok is false when the task list cannot be read.
func (c *capturer) freshTasks() (fresh []int, ok bool) {
	tids, err := procmaps.Tasks(c.p.PID)
	if err != nil {
		return nil, false
	}
	for _, tid := range tids {
		if c.seen[tid] || !c.wanted(tid) {
			continue
		}
		c.seen[tid] = true
		fresh = append(fresh, tid)
	}
	return fresh, true
}

// maxRounds bounds the re-listing of /proc/PID/task: threads born during a
// capture are picked up on the next round, until the list is stable.
const maxRounds = 16

// run captures threads until the task list is stable.
//
// In the auto and nostop modes, threads are first observed through /proc
// without any stop, several at a time (a /proc read costs tens of
// microseconds here; a 512-thread process needs thousands); the threads that
// need a stop — running ones, torn copies, and those whose no-stop capture
// the check rejects — are then stopped one at a time on the tracer thread.
func (c *capturer) run() {
	if c.opt.Mode == ModeStop && !c.noTrace || c.opt.Consistent && c.opt.Mode != ModeNoStop && !c.noTrace {
		// Start the tracer thread now, if it is not running yet: not
		// between a thread's /proc reads and its stop. The auto mode
		// starts it only once some thread needs a stop
		// (observeThenStop): a dump of blocked threads reads them all
		// through /proc and process_vm_readv, and an OS thread and its
		// hand-offs cost a one-off dump a tenth of its time.
		// stackshot is kept off the busy CPUs first: the tracer's new
		// thread would otherwise start on one, beside a running thread.
		c.stayOffRunning()
		c.tracer()
	}
	if c.opt.Consistent && c.opt.Mode != ModeNoStop && !c.noTrace && !c.p.Kernel {
		c.runConsistent()
		return
	}
	for round := 0; round < maxRounds; round++ {
		fresh, ok := c.freshTasks()
		if !ok || len(fresh) == 0 {
			return
		}
		if c.opt.Mode == ModeStop && !c.noTrace {
			c.stopEach(fresh)
		} else {
			c.observeThenStop(fresh)
		}
		if c.cancelled() {
			return
		}
	}
}

// stopEach captures threads one at a time with a stop (stop mode).
func (c *capturer) stopEach(tids []int) {
	for _, tid := range tids {
		if c.cancelled() {
			return
		}
		th, ok, done := c.observe(tid)
		if ok && !done {
			c.stayOff(&th)
			th, ok = c.finishStop(th)
		}
		if ok {
			c.p.Threads = append(c.p.Threads, th)
		}
	}
}

// observeThenStop reads threads without a stop, then stops those that need
// it (auto and nostop modes).
func (c *capturer) observeThenStop(tids []int) {
	obs := c.observeAll(tids)
	seen := make([]*Thread, 0, len(obs))
	for i := range obs {
		if obs[i].ok {
			seen = append(seen, &obs[i].th)
		}
	}
	c.stayOff(seen...)
	c.verdicts = c.checkAll(obs)
	if n := len(c.p.Threads) + len(obs); n > cap(c.p.Threads) {
		// One allocation for the round's threads, not a doubling series
		// (a 512-thread Thread array is 130 KB of fresh pages).
		c.p.Threads = append(make([]Thread, 0, n), c.p.Threads...)
	}
	for i := range obs {
		if o := &obs[i]; o.ok && !o.done && c.opt.Mode != ModeNoStop && !c.noTrace {
			c.tracer() // (before the first stop, as run does in the stop mode)
			break
		}
	}
	for i := range obs {
		o := &obs[i]
		if !o.ok {
			continue
		}
		if !o.done || (o.th.Method == MethodNoStop && !o.th.Torn && !o.th.Reused && c.stopAfterAll(o) && !o.th.spareStop()) {
			if c.cancelled() {
				return
			}
			o.th, o.ok = c.finishStop(o.th)
			if !o.ok {
				continue
			}
		}
		c.p.Threads = append(c.p.Threads, o.th)
	}
}
