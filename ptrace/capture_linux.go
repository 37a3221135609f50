//go:build linux

package ptrace

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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

// Capture takes a snapshot of every thread of pid.
func Capture(pid int, opt Options, check CheckFunc) (*Process, error) {
	start := time.Now()
	p := &Process{Arch: arch.AMD64, PID: pid, Time: start.UTC()}
	if r := opt.Reuse; r != nil && r.PID == pid {
		// A sampler's next tick: identity, maps, build ids and vdso carry
		// over; one stat read tells whether the process is still there.
		ps, err := procmaps.ReadProcStat(pid)
		if err != nil {
			return nil, ErrNoProcess
		}
		p.Comm, p.Exe, p.Kernel, p.TracerPid = ps.Comm, r.Exe, r.Kernel, r.TracerPid
		p.State = string(ps.State)
		p.Maps, p.BuildIDs, p.VDSO, p.MemTID = r.Maps, r.BuildIDs, r.VDSO, r.MemTID
		if opt.RefreshMaps && !p.Kernel {
			read := procmaps.ReadMaps
			if p.MemTID != 0 {
				read = func(pid int) (procmaps.Maps, error) { return procmaps.ReadTaskMaps(pid, p.MemTID) }
			}
			if maps, err := read(pid); err == nil {
				p.Maps = maps
				p.BuildIDs = nil // the caller collects them again
			}
		}
	} else {
		st, err := procmaps.ReadStatus(pid)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, ErrNoProcess
			}
			return nil, err
		}
		if st.Tgid != 0 && st.Tgid != pid {
			return nil, fmt.Errorf("%d is a thread of process %d, not a process: %w", pid, st.Tgid, ErrNoProcess)
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
			if tids, err := procmaps.Tasks(pid); err == nil {
				for _, tid := range tids {
					if ts, err := procmaps.ReadStat(pid, tid); err == nil && tid != pid && ts.State != 'Z' && ts.State != 'X' {
						p.MemTID = tid
						break
					}
				}
			}
			if p.MemTID != 0 {
				p.Exe = procmaps.TaskExe(pid, p.MemTID)
			}
		}
		if !p.Kernel {
			readMaps := func() (procmaps.Maps, error) { return procmaps.ReadMaps(pid) }
			if p.MemTID != 0 {
				readMaps = func() (procmaps.Maps, error) { return procmaps.ReadTaskMaps(pid, p.MemTID) }
			}
			maps, err := readMaps()
			if err != nil {
				if errors.Is(err, os.ErrPermission) {
					return nil, ErrPermission
				}
				if errors.Is(err, os.ErrNotExist) {
					return nil, ErrNoProcess
				}
				return nil, fmt.Errorf("reading maps: %w", err)
			}
			p.Maps = maps
		}
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
	sharedMu.Lock()
	c := &capturer{p: p, opt: opt, check: check, seen: map[int]bool{}}
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
	defer c.finish()
	c.run()
	c.leftovers()
	if opt.Cache != nil {
		live := make(map[int]bool, len(p.Threads))
		for _, th := range p.Threads {
			live[th.TID] = true
		}
		opt.Cache.Retain(pid, live)
	}
	p.WallNS = time.Since(start).Nanoseconds()
	return p, nil
}

type capturer struct {
	p       *Process
	opt     Options
	check   CheckFunc
	t       *tracer
	seen    map[int]bool
	noTrace bool
	prev    map[int]*Thread // the previous capture's threads (Options.Reuse)
	// timeouts counts threads that would not stop in this capture.
	timeouts atomic.Int32
	mapsMu   sync.Mutex // guards p.Maps and mapsAt: observers run in parallel
	mapsAt   time.Time
}

// The tracer thread is kept across captures (a sampler takes thousands):
// between captures it traces nothing. One capture runs at a time.
var (
	sharedMu     sync.Mutex
	sharedTracer *tracer
)

func (c *capturer) tracer() *tracer {
	if c.t == nil || c.t.abandoned.Load() {
		if sharedTracer != nil && !sharedTracer.abandoned.Load() {
			c.t = sharedTracer
		} else {
			c.t = newTracer()
			sharedTracer = c.t
		}
	}
	return c.t
}

func (c *capturer) finish() {
	sharedMu.Unlock()
}

func (c *capturer) cancelled() bool {
	if c.opt.Cancel != nil {
		select {
		case <-c.opt.Cancel:
			return true
		default:
		}
	}
	return !c.opt.Deadline.IsZero() && time.Now().After(c.opt.Deadline)
}

// leftovers lists, from /proc, the threads the --timeout left uncaptured:
// a report never silently drops a thread. Threads end up in task order,
// the main thread first.
func (c *capturer) leftovers() {
	interrupted := false
	if c.opt.Cancel != nil {
		select {
		case <-c.opt.Cancel:
			interrupted = true
		default:
		}
	}
	if !interrupted && !c.opt.Deadline.IsZero() && time.Now().After(c.opt.Deadline) {
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
			if !ok {
				continue
			}
			th.Method = MethodProcOnly
			th.Err = "not captured before --timeout ran out; shown from /proc"
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

// run captures threads until the task list is stable.
//
// In the auto and nostop modes, threads are first observed through /proc
// without any stop, several at a time (a /proc read costs tens of
// microseconds here; a 512-thread process needs thousands); the threads that
// need a stop — running ones, torn copies, and those whose no-stop capture
// the check rejects — are then stopped one at a time on the tracer thread.
func (c *capturer) run() {
	if c.opt.Consistent && c.opt.Mode != ModeNoStop && !c.noTrace && !c.p.Kernel {
		c.runConsistent()
		return
	}
	for round := 0; round < 16; round++ {
		tids, err := procmaps.Tasks(c.p.PID)
		if err != nil {
			return
		}
		var fresh []int
		for _, tid := range tids {
			if c.seen[tid] || !c.wanted(tid) {
				continue
			}
			c.seen[tid] = true
			fresh = append(fresh, tid)
		}
		if len(fresh) == 0 {
			return
		}
		if c.opt.Mode == ModeStop && !c.noTrace {
			for _, tid := range fresh {
				if c.cancelled() {
					return
				}
				th, ok, done := c.observe(tid)
				if ok && !done {
					th, ok = c.finishStop(th)
				}
				if ok {
					c.p.Threads = append(c.p.Threads, th)
				}
			}
			continue
		}
		obs := c.observeAll(fresh)
		for i := range obs {
			o := &obs[i]
			if !o.ok {
				continue
			}
			if !o.done || (o.th.Method == MethodNoStop && !o.th.Torn && !o.th.Reused && c.needsStop(&o.th)) {
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
		if c.cancelled() {
			return
		}
	}
}

// stopWait bounds the wait for one thread's stop: StopWait, or less when
// the whole command's deadline is nearer.
func (c *capturer) stopWait() time.Duration {
	w := c.opt.StopWait
	if c.timeouts.Load() >= 2 {
		w /= 10
	}
	if !c.opt.Deadline.IsZero() {
		if left := time.Until(c.opt.Deadline); left < w {
			w = max(left, time.Millisecond)
		}
	}
	return w
}

// needsStop asks the check whether a no-stop capture must be redone with a
// stop (auto mode only).
func (c *capturer) needsStop(th *Thread) bool {
	if c.opt.Mode != ModeAuto || c.noTrace || c.check == nil {
		return false
	}
	return !c.check(c.p, th)
}

type observation struct {
	th       Thread
	ok, done bool
}

// observeAll observes threads through /proc, in parallel when there are
// many, keeping the task order.
func (c *capturer) observeAll(tids []int) []observation {
	out := make([]observation, len(tids))
	workers := runtime.GOMAXPROCS(0)
	if workers > 4 {
		workers = 4
	}
	if len(tids) < 16 || workers < 2 {
		for i, tid := range tids {
			if c.cancelled() {
				return out[:i]
			}
			out[i].th, out[i].ok, out[i].done = c.observe(tid)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(tids) || c.cancelled() {
					return
				}
				out[i].th, out[i].ok, out[i].done = c.observe(tids[i])
			}
		}()
	}
	wg.Wait()
	return out
}

// pre reads what /proc shows about a thread before it is stopped: a stopped
// thread's kernel stack only shows ptrace_stop.
func (c *capturer) pre(tid int) (Thread, bool) {
	th := Thread{TID: tid}
	fc := c.opt.Cache
	st, err := fc.ReadStat(c.p.PID, tid)
	if err != nil {
		return th, false // gone
	}
	th.State = string(st.State)
	th.Name = st.Comm // the same TASK_COMM_LEN name as .../comm
	th.Kernel = st.Flags&procmaps.PF_KTHREAD != 0
	if sc, err := fc.ReadSyscall(c.p.PID, tid); err == nil {
		th.Syscall = &sc
	}
	// A thread running in user space has no kernel stack worth reading.
	if (c.opt.Kernel || th.Kernel) && (th.Syscall == nil || !th.Syscall.Running) {
		ks, err := fc.ReadKernelStack(c.p.PID, tid)
		if err != nil {
			th.KernelErr = err.Error()
		} else {
			th.KernelStack = ks
		}
	}
	return th, true
}

func isBlocked(th *Thread) bool {
	return th.Syscall != nil && !th.Syscall.Running && th.Syscall.InCall &&
		(th.State == "S" || th.State == "D" || th.State == "I")
}

// observe reads a thread through /proc only. done is false when the thread
// needs a ptrace stop (running, or its copy kept tearing); ok is false when
// it is gone.
func (c *capturer) observe(tid int) (th Thread, ok, done bool) {
	pid := c.p.PID
	tryNoStop := c.opt.Mode != ModeStop || c.noTrace
	for try := 0; ; try++ {
		// A thread that did not run between the two schedstat reads was in
		// one blocked state throughout: its stat, syscall, kernel stack and
		// stack copy all belong to that state.
		var ss1 procmaps.SchedStat
		var errSS error
		if tryNoStop {
			ss1, errSS = c.opt.Cache.ReadSchedStat(pid, tid)
			// A sampler's thread that has not run since its last
			// consistent no-stop capture still has that same stack.
			if prev := c.prev[tid]; errSS == nil && try == 0 && prev != nil && prev.Sched != nil && *prev.Sched == ss1 {
				th = *prev
				th.Reused = true
				return th, true, true
			}
		}
		th, ok = c.pre(tid)
		if !ok {
			return th, false, true
		}
		switch {
		case th.Kernel:
			th.Method = MethodProcOnly
			th.Err = "kernel thread: kernel stack only"
			return th, true, true
		case th.State == "Z" || th.State == "X":
			th.Method = MethodProcOnly
			th.Err = "thread has exited (zombie)"
			return th, true, true
		}
		if !tryNoStop || errSS != nil || !isBlocked(&th) {
			break
		}
		sc := th.Syscall
		lo, hi := c.stackBounds(sc.SP)
		stk := readStack(c.p.MemPID(), sc.SP, hi, c.opt.StackBytes)
		ss2, err := c.opt.Cache.ReadSchedStat(pid, tid)
		if err != nil {
			return th, false, true // gone
		}
		th.Method = MethodNoStop
		th.StackAddr, th.Stack, th.StackLo, th.StackHi = sc.SP, stk, lo, hi
		th.Torn = ss1 != ss2
		if !th.Torn {
			ss := ss2
			th.Sched = &ss
		}
		if !th.Torn {
			return th, true, true
		}
		if try == 2 {
			break
		}
	}
	if c.opt.Mode == ModeNoStop || c.noTrace {
		if th.Method == MethodNoStop {
			return th, true, true // torn: kept, and marked
		}
		th.Method = MethodProcOnly
		if c.noTrace {
			th.Err = fmt.Sprintf("traced by pid %d; only /proc was read", c.p.TracerPid)
		} else {
			th.Err = "running; not stopped in nostop mode"
		}
		return th, true, true
	}
	return th, true, false
}

// finishStop captures a thread with a ptrace stop; if it will not stop but
// a consistent no-stop copy exists, that copy is kept.
func (c *capturer) finishStop(th Thread) (Thread, bool) {
	var fallback *Thread
	if th.Method == MethodNoStop && !th.Torn {
		keep := th
		fallback = &keep
	}
	th.Method, th.Regs, th.Stack, th.Torn, th.Err = "", nil, nil, false, ""
	got, ok := c.stop(th)
	if ok && got.Method == MethodProcOnly && fallback != nil {
		// It would not stop, but its blocked state was read consistently:
		// that is worth more than /proc alone.
		fallback.Err = "would not stop for its full registers (" + got.Err + "); unwound from its blocked state"
		return *fallback, true
	}
	return got, ok
}

// knownStackBounds is stackBounds without reading the maps again.
func (c *capturer) knownStackBounds(sp uint64) (lo, hi uint64) {
	c.mapsMu.Lock()
	defer c.mapsMu.Unlock()
	if m, ok := procmaps.Maps(c.p.Maps).Find(sp); ok {
		return m.Start, m.End
	}
	return 0, 0
}

func (c *capturer) stackBounds(sp uint64) (lo, hi uint64) {
	c.mapsMu.Lock()
	defer c.mapsMu.Unlock()
	ms := procmaps.Maps(c.p.Maps)
	if m, ok := ms.Find(sp); ok {
		return m.Start, m.End
	}
	// A thread born after the maps were read: read them again (at most
	// every few milliseconds).
	if time.Since(c.mapsAt) > 5*time.Millisecond {
		read := procmaps.ReadMaps
		if c.p.MemTID != 0 {
			read = func(pid int) (procmaps.Maps, error) { return procmaps.ReadTaskMaps(pid, c.p.MemTID) }
		}
		if nm, err := read(c.p.PID); err == nil {
			c.p.Maps = nm
			c.mapsAt = time.Now()
			if m, ok := procmaps.Maps(nm).Find(sp); ok {
				return m.Start, m.End
			}
		}
	}
	return 0, 0
}

// stop captures a thread with a ptrace stop. The tracer thread blocks in
// wait4 (the fastest way to learn of the stop); a watchdog bounds the wait:
// if the thread has not stopped in time, the tracer is abandoned, a new one
// takes over, and the stuck one detaches the thread whenever it stops (or
// the kernel does, when stackshot exits).
func (c *capturer) stop(th Thread) (Thread, bool) {
	t := c.tracer()
	done := make(chan stopResult, 1)
	// state: 0 waiting for the stop, 1 the wait returned, 2 timed out.
	var state atomic.Int32
	sent := t.do(func() {
		var r stopResult
		// The watchdog is armed before the stop, so nothing but the
		// capture itself runs inside the pause.
		wd := time.AfterFunc(c.stopWait(), func() {
			if state.CompareAndSwap(0, 2) {
				t.abandoned.Store(true)
				done <- stopResult{timeout: true, err: errTimeout}
			}
		})
		defer wd.Stop()
		if err := unix.PtraceSeize(th.TID); err != nil {
			r.gone = errors.Is(err, unix.ESRCH)
			r.err = err
			if state.CompareAndSwap(0, 1) {
				done <- r
			}
			return
		}
		r.t0 = time.Now()
		if err := unix.PtraceInterrupt(th.TID); err != nil {
			r.gone = errors.Is(err, unix.ESRCH)
			r.err = err
			if state.CompareAndSwap(0, 1) {
				done <- r
			}
			return
		}
		sig, gone, ok := waitStopBlocking(th.TID)
		if !state.CompareAndSwap(0, 1) {
			// Too late: the capture went on without this thread.
			if ok {
				detach(th.TID, sig)
			}
			return
		}
		switch {
		case gone:
			r.gone, r.err = true, unix.ESRCH
		case !ok:
			r.err = errors.New("unexpected wait status")
			detach(th.TID, 0)
		default:
			r.sig = sig
			var n int
			r.regs, r.err = getRegs(th.TID)
			if r.err == nil {
				sp := r.regs[arch.UserRSP]
				// Known maps only: re-reading them (a millisecond for a
				// large process) waits until after the detach.
				lo, hi := c.knownStackBounds(sp)
				// Into the tracer's pre-faulted scratch buffer: page faults
				// on a fresh buffer would cost more than the copy.
				n = ReadMemory(c.p.MemPID(), t.scratchFor(stackLen(sp, hi, c.opt.StackBytes)), sp)
				r.sp, r.lo, r.hi = sp, lo, hi
			}
			detach(th.TID, sig)
			r.pause = time.Since(r.t0)
			if n > 0 {
				r.stack = append([]byte(nil), t.scratch[:n]...)
			}
		}
		done <- r
	}, done)
	if !sent {
		th.Method = MethodProcOnly
		th.Err = "tracer unavailable"
		return th, true
	}
	res := <-done
	switch {
	case res.gone:
		return th, false
	case res.timeout:
		c.timeouts.Add(1)
		th.Method = MethodProcOnly
		th.Err = fmt.Sprintf("thread did not stop within %v (state %s%s); shown from /proc", c.stopWait().Round(time.Millisecond), th.State, describeBlock(th))
		// The kernel stack and syscall read before the stop attempt stand.
		return th, true
	case errors.Is(res.err, unix.EPERM):
		th.Method = MethodProcOnly
		th.Err = "ptrace not permitted; shown from /proc"
		return th, true
	case res.err != nil:
		if errors.Is(res.err, unix.ESRCH) {
			return th, false
		}
		th.Method = MethodProcOnly
		th.Err = res.err.Error()
		return th, true
	}
	if res.hi == 0 && res.sp != 0 {
		// A thread born after the maps were read: its stack's bounds,
		// now that it runs again (the copy itself was a modest one).
		res.lo, res.hi = c.stackBounds(res.sp)
	}
	th.Method = MethodPtrace
	th.PauseNS = res.pause.Nanoseconds()
	th.Regs = res.regs
	th.StackAddr, th.Stack, th.StackLo, th.StackHi = res.sp, res.stack, res.lo, res.hi
	th.Signal = res.sig
	return th, true
}

func describeBlock(th Thread) string {
	if th.State == "D" {
		return ", uninterruptible sleep"
	}
	return ""
}

type stopResult struct {
	t0      time.Time
	pause   time.Duration
	regs    []uint64
	stack   []byte
	sp      uint64
	lo, hi  uint64
	sig     int
	gone    bool
	timeout bool
	err     error
}

var errTimeout = errors.New("timed out waiting for the thread to stop")

// waitStop polls for tid's stop until deadline. It returns a signal that
// must be handed back at detach (a signal-delivery stop), whether the thread
// is gone, and whether it stopped.
func waitStop(tid int, deadline time.Time) (sig int, gone, ok bool) {
	spins := 0
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(tid, &ws, unix.WALL|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, true, false // ECHILD: not ours any more
		}
		if wpid == tid {
			if sig, gone, ok, final := classifyStop(ws); final {
				return sig, gone, ok
			}
		}
		if time.Now().After(deadline) {
			return 0, false, false
		}
		spins++
		if spins < 200 {
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// waitStopBlocking waits for tid's stop. Same results as waitStop.
func waitStopBlocking(tid int) (sig int, gone, ok bool) {
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(tid, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || wpid != tid {
			return 0, true, false
		}
		if sig, gone, ok, final := classifyStop(ws); final {
			return sig, gone, ok
		}
	}
}

// classifyStop reads a wait status of a seized thread. final is false for
// a status that is not a stop or an exit (keep waiting).
func classifyStop(ws unix.WaitStatus) (sig int, gone, ok, final bool) {
	switch {
	case ws.Exited() || ws.Signaled():
		return 0, true, false, true
	case ws.Stopped():
		// status>>16 is the ptrace event: PTRACE_EVENT_STOP is our
		// interrupt (SIGTRAP) or a group-stop (SIGSTOP, SIGTSTP, ...),
		// which detach preserves without any signal.
		if event := (uint32(ws) >> 16) & 0xff; event != 0 {
			return 0, false, true, true
		}
		// A signal-delivery stop: the signal is held; give it back at
		// detach so the target loses nothing.
		return int(ws.StopSignal()), false, true, true
	}
	return 0, false, false, false
}

func getRegs(tid int) ([]uint64, error) {
	regs := make([]uint64, arch.UserRegsCount)
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&regs[0]))}
	iov.SetLen(len(regs) * 8)
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETREGSET, uintptr(tid), uintptr(_NT_PRSTATUS), uintptr(unsafe.Pointer(&iov)), 0, 0)
	if e != 0 {
		return nil, e
	}
	return regs, nil
}

const _NT_PRSTATUS = 1

func detach(tid, sig int) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(tid), 0, uintptr(sig), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// stackLen is how many bytes to copy from sp: up to hi (the end of its
// mapping), at most max.
func stackLen(sp, hi uint64, max int) int {
	if sp == 0 {
		return 0
	}
	n := uint64(max)
	if hi > sp && hi-sp < n {
		n = hi - sp
	} else if hi == 0 || hi <= sp {
		n = 64 << 10 // unknown mapping: a modest copy
		if n > uint64(max) {
			n = uint64(max)
		}
	}
	return int(n)
}

// readStack copies the stack from sp up to hi (the end of its mapping),
// at most max bytes. Reads are split at page boundaries, so an unreadable
// page ends the copy instead of failing it.
func readStack(pid int, sp, hi uint64, max int) []byte {
	n := stackLen(sp, hi, max)
	if n == 0 {
		return nil
	}
	buf := make([]byte, n)
	got := ReadMemory(pid, buf, sp)
	return buf[:got]
}

// ReadMemory copies target memory at addr into buf, page by page, and
// returns how many bytes were read before the first unreadable page.
func ReadMemory(pid int, buf []byte, addr uint64) int {
	const page = 4096
	const maxIov = 1024
	var remote [maxIov]unix.RemoteIovec
	total := 0
	for total < len(buf) {
		n := 0
		off := total
		a := addr + uint64(total)
		for n < maxIov && off < len(buf) {
			l := page - int(a%page)
			if l > len(buf)-off {
				l = len(buf) - off
			}
			remote[n] = unix.RemoteIovec{Base: uintptr(a), Len: l}
			n++
			off += l
			a += uint64(l)
		}
		local := []unix.Iovec{{Base: &buf[total]}}
		local[0].SetLen(off - total)
		got, err := unix.ProcessVMReadv(pid, local, remote[:n], 0)
		if got > 0 {
			total += got
		}
		if err != nil || got < off-(total-got) {
			break
		}
	}
	return total
}

// MemReader reads a live target's memory (io.ReaderAt over its address space).
type MemReader struct{ PID int }

// ReadAt implements io.ReaderAt.
func (m MemReader) ReadAt(p []byte, off int64) (int, error) {
	n := ReadMemory(m.PID, p, uint64(off))
	if n < len(p) {
		return n, fmt.Errorf("reading %#x in pid %d: short read (%d of %d)", off, m.PID, n, len(p))
	}
	return n, nil
}

// ReadMemory implements unwind.Memory.
func (m MemReader) ReadMemory(p []byte, addr uint64) (int, error) {
	return m.ReadAt(p, int64(addr))
}

// runConsistent stops every thread first, captures them all, and resumes
// them together: one instant across threads.
func (c *capturer) runConsistent() {
	t := c.tracer()
	pid := c.p.PID
	type entry struct {
		th      Thread
		stopped bool
		sig     int
		t0      time.Time
	}
	var entries []*entry
	t.do(func() {
		// Seize and interrupt until the task list is stable: a thread born
		// before its creator stopped is picked up on the next round.
		for round := 0; round < 16; round++ {
			tids, err := procmaps.Tasks(pid)
			if err != nil {
				break
			}
			fresh := 0
			for _, tid := range tids {
				if c.seen[tid] || !c.wanted(tid) {
					continue
				}
				c.seen[tid] = true
				fresh++
				th, ok := c.pre(tid)
				if !ok {
					continue
				}
				e := &entry{th: th}
				entries = append(entries, e)
				if th.Kernel || th.State == "Z" || th.State == "X" {
					continue
				}
				if err := unix.PtraceSeize(tid); err != nil {
					continue
				}
				e.t0 = time.Now()
				if unix.PtraceInterrupt(tid) != nil {
					continue
				}
				e.stopped = true
			}
			if fresh == 0 {
				break
			}
		}
		deadline := time.Now().Add(c.stopWait())
		for _, e := range entries {
			if !e.stopped {
				continue
			}
			sig, gone, ok := waitStop(e.th.TID, deadline)
			e.sig = sig
			if gone || !ok {
				e.stopped = false
				if !gone {
					e.th.Method = MethodProcOnly
					e.th.Err = fmt.Sprintf("thread did not stop within %v (state %s%s); shown from /proc", c.opt.StopWait, e.th.State, describeBlock(e.th))
					t.abandoned.Store(true) // its thread exit detaches it
				} else {
					e.th.Err = "gone"
				}
				continue
			}
			regs, err := getRegs(e.th.TID)
			if err != nil {
				continue
			}
			sp := regs[arch.UserRSP]
			lo, hi := c.stackBounds(sp)
			e.th.Regs = regs
			e.th.StackAddr, e.th.StackLo, e.th.StackHi = sp, lo, hi
			e.th.Stack = readStack(c.p.MemPID(), sp, hi, c.opt.StackBytes)
			e.th.Method = MethodPtrace
		}
		for _, e := range entries {
			if e.th.Method == MethodPtrace {
				detach(e.th.TID, e.sig)
				e.th.PauseNS = time.Since(e.t0).Nanoseconds()
				e.th.Signal = e.sig
			}
		}
	})
	for _, e := range entries {
		if e.th.Err == "gone" {
			continue
		}
		if e.th.Method == "" {
			e.th.Method = MethodProcOnly
			if e.th.Kernel {
				e.th.Err = "kernel thread: kernel stack only"
			} else if e.th.Err == "" {
				e.th.Err = "could not be stopped; shown from /proc"
			}
		}
		c.p.Threads = append(c.p.Threads, e.th)
	}
}
