package resolve

import (
	"fmt"
	"io"

	"stackshot/internal/contain"
	"stackshot/ptrace"
	"stackshot/report"
)

// unwindHook, when set (by tests only), is called with each thread id
// before its stack is unwound; a test makes it panic for one thread.
var unwindHook func(tid int)

// safeThread is thread with a panic (a bug met on the target's hostile
// bytes while unwinding or symbolizing) turned into this thread's error:
// the other threads and processes are still reported.
func (r *Resolver) safeThread(s *Space, th *ptrace.Thread) report.Thread {
	var t report.Thread
	err := contain.Call(fmt.Sprintf("resolving thread %d", th.TID), func() { t = r.thread(s, th) })
	if err == nil {
		return t
	}
	r.frames, r.syms = nil, nil // whatever the panic left half-built
	t = Head(th)
	t.Error = err.Error()
	return t
}

// SafeProcess prefetches debug files (debuginfod) and resolves one
// capture (Process); a panic that escapes the per-thread guard becomes
// this process's error, in the contract's words.
func (r *Resolver) SafeProcess(p *ptrace.Process, mem io.ReaderAt) (rp *report.Process, err error) {
	perr := contain.Call(fmt.Sprintf("resolving process %d", p.PID), func() {
		r.PrefetchDebug(p) // (debuginfod) now that every thread runs again
		rp = r.Process(p, mem)
	})
	if perr != nil {
		return nil, fmt.Errorf("cannot show process %d (%v)", p.PID, perr)
	}
	return rp, nil
}
