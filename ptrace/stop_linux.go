//go:build linux

package ptrace

// One thread's ptrace stop: seize, interrupt, wait, copy, detach.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"stackshot/internal/arch"
)

// minStopWait is the least wait a stop is given however near the deadline:
// a healthy thread on a loaded machine can need tens of milliseconds to get
// a CPU and reach its stop, and giving up on it sooner would report a hang
// that is not there. Once the deadline has passed no stop is started.
const minStopWait = 100 * time.Millisecond

// stopWait bounds the wait for one thread's stop: StopWait (a tenth of it
// after two threads would not stop), or the time left before the deadline
// when that is shorter, but never under minStopWait.
func (c *capturer) stopWait() time.Duration {
	w := c.opt.StopWait
	if c.timeouts.Load() >= 2 {
		w /= 10
	}
	if !c.opt.Deadline.IsZero() {
		if left := time.Until(c.opt.Deadline); left < w {
			w = max(left, min(w, minStopWait))
		}
	}
	return w
}

// finishStop captures a thread with a ptrace stop; if it will not stop but
// a consistent no-stop copy exists, that copy is kept.
func (c *capturer) finishStop(th Thread) (Thread, bool) {
	var fallback *Thread
	if th.Method == MethodNoStop && !th.Torn {
		keep := th
		fallback = &keep
	}
	th.Method, th.Regs, th.Stack, th.Torn, th.Outcome, th.Err = "", nil, nil, false, OutcomeCaptured, ""
	got, ok := c.stop(th)
	if ok && got.Method == MethodProcOnly && fallback != nil {
		// It would not stop, but its blocked state was read consistently:
		// that is worth more than /proc alone.
		fallback.Outcome = OutcomeStopFallback
		fallback.Err = "would not stop for its full registers (" + got.Err + "); unwound from its blocked state"
		return *fallback, true
	}
	return got, ok
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
	outcome Outcome // why it failed, with err
	err     error
}

// stop captures a thread with a ptrace stop. The tracer thread blocks in
// wait4 (the fastest way to learn of the stop); a watchdog bounds the wait:
// if the thread has not stopped in time, the tracer is abandoned, a new one
// takes over, and the stuck one detaches the thread whenever it stops (or
// the kernel does, when stackshot exits). ok is false when the thread is
// gone.
func (c *capturer) stop(th Thread) (Thread, bool) {
	t := c.tracer()
	wait := c.stopWait()
	done := make(chan stopResult, 1)
	sent := t.do(func() { c.stopJob(t, th.TID, wait, done) }, done)
	if !sent {
		th.giveUp(OutcomeTracerUnavailable, "tracer unavailable")
		return th, true
	}
	res := <-done
	switch {
	case res.gone:
		return th, false
	case res.timeout:
		c.timeouts.Add(1)
		// The kernel stack and syscall read before the stop attempt stand.
		th.giveUp(OutcomeNotStopped, notStoppedMsg(th, wait))
		return th, true
	case errors.Is(res.err, unix.ESRCH):
		return th, false
	case res.err != nil:
		th.giveUp(res.outcome, failMsg(res.outcome, res.err))
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

// failMsg is the sentence for a stop that failed with outcome o and err.
func failMsg(o Outcome, err error) string {
	if o == OutcomeNotPermitted {
		return "ptrace not permitted; shown from /proc"
	}
	return err.Error() + "; shown from /proc"
}

func notStoppedMsg(th Thread, wait time.Duration) string {
	block := ""
	if th.State == "D" {
		block = ", uninterruptible sleep"
	}
	return fmt.Sprintf("thread did not stop within %v (state %s%s); shown from /proc", wait.Round(time.Millisecond), th.State, block)
}

// stopJob runs on tracer t: it stops tid, copies its registers and stack,
// detaches it, and sends the result on done — or, when the watchdog fires
// first (after wait), abandons t and sends a timeout.
func (c *capturer) stopJob(t *tracer, tid int, wait time.Duration, done chan<- stopResult) {
	// state: 0 waiting for the stop, 1 the wait returned, 2 timed out.
	var state atomic.Int32
	// The watchdog is armed before the stop, so nothing but the capture
	// itself runs inside the pause.
	wd := time.AfterFunc(wait, func() {
		if state.CompareAndSwap(0, 2) {
			t.abandoned.Store(true)
			done <- stopResult{timeout: true}
		}
	})
	defer wd.Stop()
	// The scratch buffer is made and faulted in before the stop, not
	// inside it (a fresh run's first stop spent 25–70 µs on it).
	t.scratchFor(minScratch)
	var r stopResult
	r.t0, r.outcome, r.err = seizeInterrupt(tid)
	if r.err != nil {
		if r.outcome == OutcomeInterruptFailed {
			t.abandoned.Store(true)
		}
		r.gone = errors.Is(r.err, unix.ESRCH)
		if state.CompareAndSwap(0, 1) {
			done <- r
		}
		return
	}
	sig, gone, ok := waitStopBlocking(tid)
	if !state.CompareAndSwap(0, 1) {
		// Too late: the capture went on without this thread.
		if ok {
			detach(tid, sig)
		}
		return
	}
	switch {
	case gone:
		r.gone = true
	case !ok:
		// Not known to be stopped, so maybe not detachable: the tracer's
		// exit lets go of it.
		r.outcome, r.err = OutcomeWaitFailed, errors.New("unexpected wait status")
		t.abandoned.Store(true)
	default:
		r.sig = sig
		c.copyStopped(t, tid, &r)
		detach(tid, sig)
		r.pause = time.Since(r.t0)
		if len(r.stack) > 0 {
			r.stack = append([]byte(nil), r.stack...) // out of the scratch buffer
		}
	}
	done <- r
}

// copyStopped reads a stopped thread's registers and stack into r (the
// stack into t's scratch buffer). Only known maps are used: re-reading them
// (a millisecond for a large process) waits until after the detach.
func (c *capturer) copyStopped(t *tracer, tid int, r *stopResult) {
	r.regs, r.err = getRegs(tid)
	if r.err != nil {
		r.outcome = OutcomeRegsFailed
		return
	}
	r.sp = r.regs[arch.HostSP]
	r.lo, r.hi = c.knownStackBounds(r.sp)
	// Into the tracer's pre-faulted scratch buffer: page faults on a fresh
	// buffer would cost more than the copy.
	buf := t.scratchFor(stackLen(r.sp, r.hi, c.opt.StackBytes))
	r.stack = buf[:ReadMemory(c.p.MemPID(), buf, r.sp)]
}

// interruptHook, when set (by tests), runs instead of PTRACE_INTERRUPT.
var interruptHook func(tid int) error

// seizeInterrupt seizes tid and asks it to stop, returning when the
// interrupt was sent. When the interrupt fails the thread stays seized, and
// PTRACE_DETACH only works on a stopped thread: the caller must abandon
// tracer t, whose thread's exit detaches it (the tracer otherwise lives on
// across captures, keeping the target traced).
func seizeInterrupt(tid int) (t0 time.Time, o Outcome, err error) {
	if err := unix.PtraceSeize(tid); err != nil {
		if errors.Is(err, unix.EPERM) {
			return t0, OutcomeNotPermitted, err
		}
		return t0, OutcomeSeizeFailed, fmt.Errorf("PTRACE_SEIZE: %w", err)
	}
	t0 = time.Now()
	interrupt := unix.PtraceInterrupt
	if interruptHook != nil {
		interrupt = interruptHook
	}
	if err := interrupt(tid); err != nil {
		return t0, OutcomeInterruptFailed, fmt.Errorf("PTRACE_INTERRUPT: %w", err)
	}
	return t0, OutcomeCaptured, nil
}

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
	regs := make([]uint64, arch.HostRegsCount)
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
