//go:build linux

package ptrace

// Reading threads through /proc without any stop.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"stackshot/procmaps"
)

// needsStop asks the check whether a no-stop capture must be redone with a
// stop (auto mode only).
func (c *capturer) needsStop(th *Thread) bool {
	if c.opt.Mode != ModeAuto || c.noTrace {
		return false
	}
	if c.opt.CheckAll != nil {
		return !c.verdicts[th]
	}
	return c.check != nil && !c.check(c.p, th)
}

// checkAll asks Options.CheckAll, once, about every thread of obs that
// needsStop will ask about: its answers by thread (nil: no CheckAll).
func (c *capturer) checkAll(obs []observation) map[*Thread]bool {
	if c.opt.CheckAll == nil || c.opt.Mode != ModeAuto || c.noTrace {
		return nil
	}
	var ths []*Thread
	for i := range obs {
		o := &obs[i]
		if o.ok && o.done && o.th.Method == MethodNoStop && !o.th.Torn && !o.th.Reused {
			ths = append(ths, &o.th)
		}
	}
	if len(ths) == 0 {
		return nil
	}
	ans := c.opt.CheckAll(c.p, ths)
	out := make(map[*Thread]bool, len(ths))
	for i, th := range ths {
		out[th] = i < len(ans) && ans[i]
	}
	return out
}

type observation struct {
	th       Thread
	ok, done bool
}

// observeAll observes threads through /proc, in parallel when there are
// many, keeping the task order.
func (c *capturer) observeAll(tids []int) []observation {
	out := make([]observation, len(tids))
	workers := min(runtime.GOMAXPROCS(0), 4)
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
// thread's kernel stack only shows ptrace_stop. ok is false when the
// thread is gone.
func (c *capturer) pre(tid int) (Thread, bool) {
	th := Thread{TID: tid}
	fc := c.opt.Cache
	st, err := fc.ReadStat(c.p.PID, tid)
	if err != nil {
		return th, false
	}
	th.State = string(st.State)
	th.Name = st.Comm // the same TASK_COMM_LEN name as .../comm
	th.Kernel = st.Flags&procmaps.PF_KTHREAD != 0
	// A kernel thread makes no system calls: its syscall file shows the
	// zeroed user registers it never had ("0 0x0 ... 0x0", read(0, ...)).
	if !th.Kernel {
		if sc, err := fc.ReadSyscall(c.p.PID, tid); err == nil {
			th.Syscall = &sc
		}
	}
	// A thread running in user space has no kernel stack worth reading.
	if (c.opt.Kernel || th.Kernel) && (th.Syscall == nil || !th.Syscall.Running) {
		ks, err := fc.ReadKernelStack(c.p.PID, tid)
		switch {
		case err == nil:
			th.KernelStack = ks
		case errors.Is(err, os.ErrPermission):
			th.KernelOutcome, th.KernelErr = KernelDenied, err.Error()
		default:
			th.KernelOutcome, th.KernelErr = KernelUnreadable, err.Error()
		}
	}
	return th, true
}

func isBlocked(th *Thread) bool {
	return th.Syscall != nil && !th.Syscall.Running && th.Syscall.InCall &&
		(th.State == "S" || th.State == "D" || th.State == "I")
}

// maxNoStopTries bounds the no-stop copies of a thread that keeps running
// while it is copied.
const maxNoStopTries = 3

// observe reads a thread through /proc only. done is false when the thread
// needs a ptrace stop (running, or its copy kept tearing); ok is false when
// it is gone.
func (c *capturer) observe(tid int) (th Thread, ok, done bool) {
	defer c.forget(tid)
	tryNoStop := c.opt.Mode != ModeStop || c.noTrace
	for try := 0; try < maxNoStopTries; try++ {
		// A thread that did not run between the two schedstat reads was in
		// one blocked state throughout: its stat, syscall, kernel stack and
		// stack copy all belong to that state.
		var ss1 procmaps.SchedStat
		var errSS error
		if tryNoStop {
			ss1, errSS = c.opt.Cache.ReadSchedStat(c.p.PID, tid)
			// A sampler's thread that has not run since its last
			// consistent no-stop capture still has that same stack.
			if prev := c.prev[tid]; errSS == nil && try == 0 && prev != nil && prev.Sched != nil && *prev.Sched == ss1 {
				th = *prev
				th.Reused = true
				return th, true, true
			}
		}
		if th, ok = c.pre(tid); !ok {
			return th, false, true
		}
		switch {
		case th.Kernel:
			th.giveUp(OutcomeKernelThread, "kernel thread: kernel stack only")
			return th, true, true
		case th.State == "Z" || th.State == "X":
			th.giveUp(OutcomeExited, "thread has exited (zombie)")
			return th, true, true
		}
		if !tryNoStop || errSS != nil || !isBlocked(&th) {
			break
		}
		if ok = c.copyBlocked(&th, ss1); !ok {
			return th, false, true
		}
		if !th.Torn {
			return th, true, true
		}
	}
	if c.opt.Mode == ModeNoStop || c.noTrace {
		switch {
		case th.Method == MethodNoStop: // torn: kept, and marked
		case c.noTrace:
			th.giveUp(OutcomeTraced, fmt.Sprintf("traced by pid %d; only /proc was read", c.p.TracerPid))
		default:
			th.giveUp(OutcomeRunning, "running; not stopped in nostop mode")
		}
		return th, true, true
	}
	return th, true, false
}

// copyBlocked copies the stack of a thread blocked in a system call from
// the syscall's SP, and tells by a second schedstat read (ss1 was the
// first) whether it ran meanwhile (Torn). It reports false if the thread
// is gone.
func (c *capturer) copyBlocked(th *Thread, ss1 procmaps.SchedStat) bool {
	sp := th.Syscall.SP
	lo, hi := c.stackBounds(sp)
	stk := readStack(c.p.MemPID(), sp, hi, c.opt.StackBytes)
	ss2, err := c.opt.Cache.ReadSchedStat(c.p.PID, th.TID)
	if err != nil {
		return false
	}
	th.Method = MethodNoStop
	th.StackAddr, th.Stack, th.StackLo, th.StackHi = sp, stk, lo, hi
	th.Torn = ss1 != ss2
	if !th.Torn {
		th.Sched = &ss2
	}
	return true
}
