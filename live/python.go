//go:build linux

package live

import (
	"errors"
	"fmt"

	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
)

// addPython reads the Python frames of a CPython process into rp's
// threads (pyruntime), after every thread runs again; a process that is
// none is left as it is. What could not be read is a warning.
func (s *Session) addPython(p *ptrace.Process, rp *report.Process) {
	if s.o.NoPython {
		return
	}
	cands := pyruntime.Candidates(p.Exe, p.Maps)
	if len(cands) == 0 {
		return
	}
	if s.sandboxFor(p.PID) != nil {
		rp.Warnings = append(rp.Warnings, "Python frames not read: the process belongs to another user, and its memory is parsed in a sandboxed child, which does not read them yet (run as the process's owner to see them)")
		return
	}
	rt, err := pyruntime.OpenLive(p.MemPID(), cands, ptrace.MemReader{PID: p.MemPID()})
	var unknown *pyruntime.UnknownVersionError
	switch {
	case errors.Is(err, pyruntime.ErrNotPython):
		return
	case errors.As(err, &unknown):
		rp.AddRuntime(report.Runtime{Name: "python", Version: unknown.Version})
		rp.Warnings = append(rp.Warnings, unknown.Error())
		return
	case err != nil:
		rp.AddRuntime(report.Runtime{Name: "python"})
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Python frames not read (%v)", err))
		return
	}
	rp.AddRuntime(report.Runtime{Name: "python", Version: rt.Version})
	threads, err := rt.Threads()
	if err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Python frames not read past a thread state that does not check out (%v)", err))
	}
	pyruntime.Merge(rp, rt, threads)
}
