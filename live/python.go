//go:build linux

package live

import (
	"fmt"

	"stackshot/diagnose"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
	"stackshot/sandbox"
)

// pyState is what addPython read, kept for what the diagnosis asks of
// it afterwards; nil when the process's Python frames were not read.
// In-process: the runtime and its threads; in the sandboxed child: the
// child, the process and the mapping whose file holds the runtime (the
// child reads the RLock owners again from them).
type pyState struct {
	rt      *pyruntime.Runtime
	threads []pyruntime.Thread
	child   *sandbox.Child
	p       *ptrace.Process
	at      *procmaps.Mapping
}

// addPython reads the Python frames of a CPython process into rp's
// threads (pyruntime), after every thread runs again; a process that is
// none is left as it is. What could not be read is a warning.
func (s *Session) addPython(p *ptrace.Process, rp *report.Process) *pyState {
	if s.o.NoPython {
		return nil
	}
	cands := pyruntime.Candidates(p.Exe, p.Maps, pyruntime.EvalModules(rp))
	if len(cands) == 0 {
		return nil
	}
	if child := s.sandboxFor(p.PID); child != nil {
		at := child.RuntimeFrames(p, rp, "python", cands)
		if at == nil {
			return nil
		}
		return &pyState{child: child, p: p, at: at}
	}
	sandbox.CountInProcess(fmt.Sprintf("process %d's Python frames", p.PID))
	rt, threads, _ := pyruntime.ReadInto(rp, func() (*pyruntime.Runtime, error) {
		return pyruntime.OpenLive(p.MemPID(), cands, ptrace.MemReader{PID: p.MemPID()})
	})
	if rt == nil {
		return nil
	}
	return &pyState{rt: rt, threads: threads}
}

// nameLockWaits says which threads of rp (diagnosed) wait for a Python
// lock, names each waited-for RLock's owner (one of tasks, the target's
// threads now) and the GIL's holder, and finds the cycles those owners
// close.
func (py *pyState) nameLockWaits(rp *report.Process, tasks map[int]bool) {
	pyruntime.NameLockWaits(rp)
	if py == nil {
		return
	}
	if py.child != nil {
		py.child.RuntimeLocks(py.p, rp, "python", py.at, tasks)
	} else {
		py.rt.NameRLockOwners(rp, py.threads)
	}
	pyruntime.NameGILWaits(rp)
	if rp.Diagnosed {
		rp.Deadlocks = diagnose.Deadlocks(rp.Threads)
	}
}
