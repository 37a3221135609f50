//go:build linux

package live

import (
	"errors"
	"fmt"

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
	rt, err := pyruntime.OpenLive(p.MemPID(), cands, ptrace.MemReader{PID: p.MemPID()})
	var unknown *pyruntime.UnknownVersionError
	switch {
	case errors.Is(err, pyruntime.ErrNotPython):
		return nil
	case errors.As(err, &unknown):
		rp.AddRuntime(report.Runtime{Name: "python", Version: unknown.Version})
		rp.Warnings = append(rp.Warnings, unknown.Error())
		return nil
	case err != nil:
		rp.AddRuntime(report.Runtime{Name: "python"})
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Python frames not read (%v)", err))
		return nil
	}
	rp.AddRuntime(report.Runtime{Name: "python", Version: rt.Version})
	threads, err := rt.Threads()
	if err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Python frames not read past a thread state that does not check out (%v)", err))
	}
	pyruntime.Merge(rp, rt, threads)
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
