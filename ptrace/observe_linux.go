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
// needsStop will ask about and that was not asked about while observed
// (batchChecker): its answers by thread (nil: none asked).
func (c *capturer) checkAll(obs []observation) map[*Thread]bool {
	if !c.checksInBatches() {
		return nil
	}
	var ths []*Thread
	for i := range obs {
		if o := &obs[i]; o.wantsCheck() && !o.checked {
			ths = append(ths, &o.th)
		}
	}
	if len(ths) == 0 {
		return nil
	}
	ans := c.opt.CheckAll(c.p, ths)()
	out := make(map[*Thread]bool, len(ths))
	for i, th := range ths {
		out[th] = i < len(ans) && ans[i]
	}
	return out
}

type observation struct {
	th       Thread
	ok, done bool
	// checked: the check was asked already, while other threads were
	// being observed (checkEarly); clean is its answer.
	checked, clean bool
}

// wantsCheck tells whether the check is asked about o: a clean no-stop
// copy.
func (o *observation) wantsCheck() bool {
	return o.ok && o.done && o.th.Method == MethodNoStop && !o.th.Torn && !o.th.Reused
}

// stopAfterAll tells whether the no-stop capture o needs a stop after all
// (the check's answer, asked now unless already asked).
func (c *capturer) stopAfterAll(o *observation) bool {
	if o.checked {
		return !o.clean
	}
	return c.needsStop(&o.th)
}

// checkEarly tells whether the check is asked about each thread as soon as
// it is observed, beside the observers, rather than after all of them: a
// per-thread CheckFunc in the auto mode (CheckAll is asked in batches:
// batchChecker).
func (c *capturer) checkEarly() bool {
	return c.opt.Mode == ModeAuto && !c.noTrace && c.opt.CheckAll == nil && c.check != nil
}

// checksInBatches tells whether the check is Options.CheckAll's, asked
// about batches of threads.
func (c *capturer) checksInBatches() bool {
	return c.opt.CheckAll != nil && c.opt.Mode == ModeAuto && !c.noTrace
}

// checkBatch is how many observations may wait for the checker before an
// observer yields to it.
const checkBatch = 16

// Batches of Options.CheckAll asked while threads are observed
// (batchChecker): the first small, for the checker to start on (a checker
// in another process loads the modules with it), then larger; at most
// maxBatchesAsked unanswered at a time (a checker's answers wait in a
// socket until read: they must not fill it).
const (
	firstAskBatch   = 8
	askBatch        = 64
	maxBatchesAsked = 16
)

// checker asks the check, one thread at a time in the order they arrive
// on todo, about observations of out, until todo is closed; done is then
// closed, after a panic of the check is put in *panicked (the caller
// panics with it, as a check in its own goroutine would).
//
// The check reads the process's maps, which an observer may read again
// (stackBounds): each answer is asked under mapsMu's read lock. Its
// answers are those it would give after all threads were observed, but
// for a library mapped while the capture runs, which a check asked
// before the maps were read again does not know: that thread is then
// stopped, as it would be if its maps had been read before.
func (c *capturer) checker(out []observation, todo <-chan int, done chan<- struct{}, panicked *any) {
	defer close(done)
	defer func() {
		if v := recover(); v != nil {
			*panicked = v
		}
	}()
	for i := range todo {
		o := &out[i]
		c.mapsMu.RLock()
		o.clean = !c.needsStop(&o.th)
		c.mapsMu.RUnlock()
		o.checked = true
	}
}

// batchChecker is checker for Options.CheckAll: it asks about the
// observations of out arriving on todo in batches, without waiting for
// the answers, so that a checker in another process unwinds beside the
// observers; the answers are read, in the order asked, once todo is
// closed (or when too many are owed). Each batch is asked under mapsMu's
// read lock (the checker may be handed the maps); its answer is read
// without it (the checker may be waiting for another process).
func (c *capturer) batchChecker(out []observation, todo <-chan int, done chan<- struct{}, panicked *any) {
	defer close(done)
	defer func() {
		if v := recover(); v != nil {
			*panicked = v
		}
	}()
	type asked struct {
		idx     []int
		answers func() []bool
	}
	var owed []asked
	answer := func() {
		a := owed[0]
		owed = owed[1:]
		ans := a.answers()
		for j, i := range a.idx {
			out[i].clean = j < len(ans) && ans[j]
			out[i].checked = true
		}
	}
	var batch []int
	size := firstAskBatch
	ask := func() {
		ths := make([]*Thread, len(batch))
		for j, i := range batch {
			ths[j] = &out[i].th
		}
		c.mapsMu.RLock()
		answers := c.opt.CheckAll(c.p, ths)
		c.mapsMu.RUnlock()
		owed = append(owed, asked{batch, answers})
		batch, size = nil, askBatch
		if len(owed) > maxBatchesAsked {
			answer()
		}
	}
	for i := range todo {
		if batch = append(batch, i); len(batch) >= size {
			ask()
		}
	}
	if len(batch) > 0 {
		ask()
	}
	for len(owed) > 0 {
		answer()
	}
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
	// The check (an unwind of each copy, and first the loading of the
	// process's modules) runs beside the observers instead of after them:
	// a 512-thread dump's checks take milliseconds.
	var todo chan int
	var checked chan struct{}
	var panicked any
	switch {
	case c.checkEarly():
		todo, checked = make(chan int, len(tids)), make(chan struct{})
		go c.checker(out, todo, checked, &panicked)
	case c.checksInBatches():
		todo, checked = make(chan int, len(tids)), make(chan struct{})
		go c.batchChecker(out, todo, checked, &panicked)
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
				if todo != nil && out[i].wantsCheck() {
					todo <- i // (never blocks: room for every thread)
					if len(todo) >= checkBatch {
						// The checker waits for a free P, and the
						// observers, busy in short system calls, give
						// theirs up only when preempted: let it catch up.
						runtime.Gosched()
					}
				}
			}
		}()
	}
	wg.Wait()
	if todo != nil {
		close(todo)
		<-checked
		if panicked != nil {
			panic(panicked)
		}
	}
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
	th.cpu = st.Processor
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
