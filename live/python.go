//go:build linux

package live

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"stackshot/goruntime"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
)

// pythonModules are the mapped files of p that may hold a CPython
// interpreter (an executable named python*, a libpython3.X.so), the
// lowest mapping of each.
func pythonModules(p *ptrace.Process) []*procmaps.Mapping {
	var out []*procmaps.Mapping
	seen := map[string]bool{}
	for i := range p.Maps {
		m := &p.Maps[i]
		base := filepath.Base(m.Path)
		isExe := m.Path == p.Exe && strings.HasPrefix(base, "python")
		if m.Kind != procmaps.KindFile || seen[m.Path] || !isExe && !strings.HasPrefix(base, "libpython3.") {
			continue
		}
		seen[m.Path] = true
		out = append(out, procmaps.Maps(p.Maps).FirstOfFile(m))
	}
	return out
}

// addPython reads the Python frames of a CPython process into rp's
// threads (pyruntime), after every thread runs again; a process that is
// none is left as it is. What could not be read is a warning.
func (s *Session) addPython(p *ptrace.Process, rp *report.Process) {
	if s.o.NoPython {
		return
	}
	cands := pythonModules(p)
	if len(cands) == 0 {
		return
	}
	if s.sandboxFor(p.PID) != nil {
		rp.Warnings = append(rp.Warnings, "Python frames not read: the process belongs to another user, and its memory is parsed in a sandboxed child, which does not read them yet (run as the process's owner to see them)")
		return
	}
	mem := ptrace.MemReader{PID: p.MemPID()}
	var mods []pyruntime.Module
	for _, m := range cands {
		f, err := os.Open(procmaps.MapFilesPath(p.MemPID(), m))
		if err != nil {
			continue
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		bias, ok := goruntime.LoadBias(f, m.Start, m.Offset)
		if ok {
			mods = append(mods, pyruntime.Module{Path: m.Path, File: f, Size: st.Size(), Bias: bias})
		}
	}
	rt, err := pyruntime.Open(mem, mods)
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
