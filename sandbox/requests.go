//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"sort"

	"stackshot/diagnose"
	"stackshot/goruntime"
	"stackshot/ptrace"
	"stackshot/report"
)

// Goroutines reads the goroutines of the live Go program p into rp, as
// goruntime.Live does, in the child: the parent opens the executable
// (/proc/PID/exe) and hands it over with the target's memory file; the
// child parses the binary (build info, DWARF or the layout table, the
// pclntab) and the runtime's structures. rp is p's report as Resolve
// gave it. A process that is not a Go program is left as it is. A failed
// child costs the goroutines, said by err; a child that failed before is
// not asked (its failure was said then).
func (c *Child) Goroutines(p *ptrace.Process, rp *report.Process) error {
	if c.dead != nil || !c.cfg.Resolve.Live {
		return nil
	}
	exe := goruntime.OpenExe(p)
	if exe == nil {
		return nil
	}
	defer exe.Close()
	c.follow(p)
	head := *p
	head.Threads = nil
	up, err := c.roundTripFD(&downMsg{Kind: kGo, Proc: &head, Report: &report.Process{Threads: rp.Threads}}, int(exe.Fd()), c.killAt())
	if err == nil && (up.Kind != kGo || up.Result == nil) {
		err = fmt.Errorf("no goroutines (%s)", up.Err)
	}
	if err != nil {
		return fmt.Errorf("goroutines of process %d not read: the sandboxed parser failed (%v)", p.PID, err)
	}
	g := up.Result
	rp.Runtime, rp.Goroutines, rp.GoroutinesSkipped = g.Runtime, g.Goroutines, g.GoroutinesSkipped
	rp.Warnings = append(rp.Warnings, g.Warnings...)
	return nil
}

// Locks finds, in the child, which lock each blocked thread of rp (the
// live target's report, as Resolve gave it) waits for and who holds it
// (diagnose.Diagnose): the lock words are read from the target's memory
// and interpreted there. tasks are the target's threads now. What the
// child answers is checked: an owner must be one of tasks (else it is
// unknown), its name is the report's, and the deadlocks are the cycles of
// those checked edges, found here. A failed child leaves rp undiagnosed
// and err says why.
func (c *Child) Locks(rp *report.Process, tasks map[int]bool) error {
	if c.dead != nil || !c.cfg.Resolve.Live {
		return nil
	}
	tids := make([]int, 0, len(tasks))
	for t := range tasks {
		tids = append(tids, t)
	}
	sort.Ints(tids)
	up, err := c.roundTrip(&downMsg{Kind: kLocks, Report: &report.Process{Threads: rp.Threads}, Tasks: tids}, c.killAt())
	if err == nil && (up.Kind != kLocks || len(up.Waits) != len(rp.Threads)) {
		err = fmt.Errorf("%d answers for %d threads", len(up.Waits), len(rp.Threads))
	}
	if err != nil {
		return fmt.Errorf("lock owners of process %d not found: the sandboxed parser failed (%v)", rp.PID, err)
	}
	names := make(map[int]string, len(rp.Threads))
	for i := range rp.Threads {
		names[rp.Threads[i].TID] = rp.Threads[i].Name
	}
	for i, w := range up.Waits {
		if w != nil && w.OwnerTID != nil {
			if o := *w.OwnerTID; tasks[o] {
				w.OwnerName = names[o]
			} else {
				w.OwnerTID, w.OwnerName = nil, ""
			}
		}
		rp.Threads[i].WaitingFor = w
	}
	rp.Deadlocks = diagnose.Deadlocks(rp.Threads)
	rp.Diagnosed = true
	return nil
}

// CoreResult is one process of a core read in the child.
type CoreResult struct {
	PID     int
	Process *report.Process // nil: none of its threads kept, or Err
	Missing []int           // thread ids asked for (tids) that it lacks
	Err     string          // why it could not be shown
}

// LoadError is the child's reason a file could not be read.
type LoadError struct {
	Why        string
	NotCapture bool // not a capture stackshot knows (capfile.ErrNotCapture)
}

func (e *LoadError) Error() string { return e.Why }

// Core reads an ELF core (f, opened by the parent, of size bytes) in the
// child and resolves its process there, keeping only the threads tids
// names (all when empty): what report does in-process (capfile.Load, then
// resolve). The file's own faults come back as a *LoadError; a failed
// child as another error (nothing of the core is shown then: it was
// read only there).
func (c *Child) Core(f *os.File, size int64, tids []int) ([]CoreResult, error) {
	up, err := c.roundTripFD(&downMsg{Kind: kCore, TIDs: tids, Size: size}, int(f.Fd()), c.killAt())
	if err == nil && up.Kind != kCore {
		err = fmt.Errorf("unexpected %q", up.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("the sandboxed parser failed (%v)", err)
	}
	if up.Err != "" {
		return nil, &LoadError{Why: up.Err, NotCapture: up.NotCapture}
	}
	n := len(up.Procs)
	if len(up.Missing) != n || len(up.Errs) != n || len(up.PIDs) != n {
		return nil, fmt.Errorf("the sandboxed parser failed (%d processes, %d and %d notes)", n, len(up.Missing), len(up.Errs))
	}
	c.expired = c.expired || up.Expired
	c.budget = c.budget || up.Budget
	out := make([]CoreResult, n)
	for i := range out {
		out[i] = CoreResult{PID: up.PIDs[i], Process: up.Procs[i], Missing: up.Missing[i], Err: up.Errs[i]}
		if out[i].Process == nil && out[i].Err == "" && len(tids) == 0 {
			out[i].Err = "the sandboxed parser returned no process"
		}
	}
	return out, nil
}
