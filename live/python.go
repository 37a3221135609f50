//go:build linux

package live

import (

	"stackshot/diagnose"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
)

// pyState is what addPython read, kept for what the diagnosis asks of
// it afterwards; nil when the process's Python frames were not read.
type pyState struct {
	rt      *pyruntime.Runtime
	threads []pyruntime.Thread
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
	if s.sandboxFor(p.PID) != nil {
		rp.Warnings = append(rp.Warnings, "Python frames not read: the process belongs to another user, and its memory is parsed in a sandboxed child, which does not read them yet (run as the process's owner to see them)")
		return nil
	}
	rt, threads, _ := pyruntime.ReadInto(rp, func() (*pyruntime.Runtime, error) {
		return pyruntime.OpenLive(p.MemPID(), cands, ptrace.MemReader{PID: p.MemPID()})
	})
	if rt == nil {
		return nil
	}
	return &pyState{rt, threads}
}

// nameLockWaits says which threads of rp (diagnosed) wait for a Python
// lock, names each waited-for RLock's owner and the GIL's holder, and
// finds the cycles those owners close.
func (py *pyState) nameLockWaits(rp *report.Process) {
	pyruntime.NameLockWaits(rp)
	if py == nil {
		return
	}
	py.rt.NameRLockOwners(rp, py.threads)
	pyruntime.NameGILWaits(rp)
	if rp.Diagnosed {
		rp.Deadlocks = diagnose.Deadlocks(rp.Threads)
	}
}
