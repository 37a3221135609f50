//go:build linux

package ptrace

// The consistent mode: every thread stopped first, all captured, all
// resumed together, for one instant across threads.

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/arch"
)

// held is one thread of a consistent capture.
type held struct {
	th      Thread
	pending bool // seized and interrupted: its stop is awaited
	inStop  bool // in its ptrace stop: must be detached
	gone    bool
	sig     int
	t0      time.Time
}

// runConsistent stops every thread first, captures them all, and resumes
// them together. Inside the stop only known maps are used; the bounds of a
// stack outside them are looked up after the detach.
func (c *capturer) runConsistent() {
	t := c.tracer()
	var hs []*held
	t.do(func() {
		hs = c.seizeAll(t)
		c.waitAll(t, hs, c.stopWait())
		for _, h := range hs {
			if h.inStop {
				c.copyHeld(h)
			}
		}
		for _, h := range hs {
			if h.inStop {
				detach(h.th.TID, h.sig)
				h.th.PauseNS = time.Since(h.t0).Nanoseconds()
			}
		}
	})
	for _, h := range hs {
		if h.gone {
			continue
		}
		th := &h.th
		switch {
		case th.Method == MethodPtrace && th.StackHi == 0 && th.StackAddr != 0:
			th.StackLo, th.StackHi = c.stackBounds(th.StackAddr)
		case th.Method != "":
		case th.Kernel:
			th.giveUp(OutcomeKernelThread, "kernel thread: kernel stack only")
		case th.State == "Z" || th.State == "X":
			th.giveUp(OutcomeExited, "thread has exited (zombie)")
		default:
			th.giveUp(OutcomeUnknown, "could not be stopped; shown from /proc")
		}
		c.p.Threads = append(c.p.Threads, *th)
	}
}

// seizeAll seizes and interrupts every wanted thread until the task list
// is stable: a thread born before its creator stopped is picked up on the
// next round. A thread that could not be seized or interrupted carries
// why as its outcome.
func (c *capturer) seizeAll(t *tracer) []*held {
	var hs []*held
	for round := 0; round < maxRounds; round++ {
		fresh, ok := c.freshTasks()
		if !ok || len(fresh) == 0 {
			break
		}
		for _, tid := range fresh {
			th, ok := c.pre(tid)
			c.forget(tid)
			if !ok {
				continue
			}
			h := &held{th: th}
			hs = append(hs, h)
			if th.Kernel || th.State == "Z" || th.State == "X" {
				continue
			}
			var o Outcome
			var err error
			h.t0, o, err = seizeInterrupt(tid)
			if o == OutcomeInterruptFailed {
				t.abandoned.Store(true) // its exit detaches the thread
			}
			switch {
			case errors.Is(err, unix.ESRCH):
				h.gone = true
			case err != nil:
				h.th.giveUp(o, failMsg(o, err))
			default:
				h.pending = true
			}
		}
	}
	return hs
}

// waitAll waits, up to wait in all, for every interrupted thread's stop.
// A thread that does not stop in time is left to the tracer thread's exit
// (t is abandoned), which detaches it.
func (c *capturer) waitAll(t *tracer, hs []*held, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for _, h := range hs {
		if !h.pending {
			continue
		}
		sig, gone, ok := waitStop(h.th.TID, deadline)
		switch {
		case gone:
			h.gone = true
		case !ok:
			c.timeouts.Add(1)
			h.th.giveUp(OutcomeNotStopped, notStoppedMsg(h.th, wait))
			t.abandoned.Store(true)
		default:
			h.inStop, h.sig = true, sig
		}
	}
}

// copyHeld reads a stopped thread's registers and stack.
func (c *capturer) copyHeld(h *held) {
	regs, err := getRegs(h.th.TID)
	if err != nil {
		h.th.giveUp(OutcomeRegsFailed, failMsg(OutcomeRegsFailed, err))
		return
	}
	sp := regs[arch.HostSP]
	lo, hi := c.knownStackBounds(sp)
	h.th.Method = MethodPtrace
	h.th.Regs = regs
	h.th.StackAddr, h.th.StackLo, h.th.StackHi = sp, lo, hi
	h.th.Stack = readStack(c.p.MemPID(), sp, hi, c.opt.StackBytes)
	h.th.Signal = h.sig
}
