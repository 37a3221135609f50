package pyruntime

import (
	"errors"
	"fmt"

	"stackshot/report"
)

// ReadInto opens a process's interpreter (open: OpenLive in-process, Open
// on the files handed to the sandboxed child) and merges its threads'
// Python frames and threading names into rp (Merge), naming the runtime;
// what could not be read is a warning in rp. notPython: the process runs
// no CPython (rp is left as it is). rt is nil when no frames were read.
func ReadInto(rp *report.Process, open func() (*Runtime, error)) (rt *Runtime, threads []Thread, notPython bool) {
	rt, err := open()
	var unknown *UnknownVersionError
	switch {
	case errors.Is(err, ErrNotPython):
		return nil, nil, true
	case errors.As(err, &unknown):
		rp.AddRuntime(report.Runtime{Name: "python", Version: unknown.Version})
		rp.Warnings = append(rp.Warnings, unknown.Error())
		return nil, nil, false
	case err != nil:
		rp.AddRuntime(report.Runtime{Name: "python"})
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Python frames not read (%v)", err))
		return nil, nil, false
	}
	rp.AddRuntime(report.Runtime{Name: "python", Version: rt.Version})
	threads, err = rt.Threads()
	if err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Python frames not read past a thread state that does not check out (%v)", err))
	}
	if err := rt.Names(threads); err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Python thread names not read (%v)", err))
	}
	Merge(rp, rt, threads)
	return rt, threads, false
}
