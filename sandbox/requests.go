//go:build linux

package sandbox

import (
	"fmt"
	"os"

	"stackshot/capfile"
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
// child costs the goroutines: rp gets a warning saying so, as when they
// cannot be read in-process. A child that failed before is not asked (its
// failure was said then).
func (c *Child) Goroutines(p *ptrace.Process, rp *report.Process) {
	if c.dead != nil || !c.cfg.Resolve.Live {
		return
	}
	up, asked, err := c.awaited(rp, kGo)
	if !asked {
		exe := goruntime.OpenExe(p)
		if exe == nil {
			return
		}
		defer exe.Close()
		c.follow(p)
		head := *p
		head.Threads = nil
		b := encodeReport(&report.Process{Threads: rp.Threads})
		up, err = c.roundTripFD(&downMsg{Kind: kGo, Proc: &head, Report: b}, int(exe.Fd()), c.killAt())
	}
	if err == nil && (up.Kind != kGo || up.Result == nil) {
		err = fmt.Errorf("no goroutines (%s)", up.Err)
	}
	if err == nil {
		err = joinStacks(up.Result.Goroutines, up.Stacks, up.StackOf)
	}
	if err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("goroutines not read: the sandboxed parser failed (%v)", err))
		return
	}
	g := up.Result
	if g.Runtime != nil { // (another runtime's, a JVM's, came with the frames)
		rp.Runtime = g.Runtime
	}
	rp.Goroutines, rp.GoroutinesSkipped = g.Goroutines, g.GoroutinesSkipped
	rp.Warnings = append(rp.Warnings, g.Warnings...)
}

// joinStacks gives each goroutine its frames back from the table the
// child sent (shareStacks), shared as goruntime shares them.
func joinStacks(gs []report.Goroutine, stacks [][]report.Frame, of []int) error {
	return untabulate(stacks, of, len(gs), "goroutine", func(i int, fr []report.Frame) { gs[i].Frames = fr })
}

// Locks finds, in the child, which lock each blocked thread of rp (the
// live target's report, as Resolve gave it) waits for and who holds it
// (diagnose.Diagnose): the lock words are read from the target's memory
// and interpreted there. tasks are the target's threads now. What the
// child answers is checked: an owner must be one of tasks (else it is
// unknown), its name is the report's, and the deadlocks are the cycles of
// those checked edges, found here. The child gets only the threads
// blocked in futex(2), the only ones diagnose looks at. A failed child leaves rp undiagnosed,
// with a warning saying why.
func (c *Child) Locks(rp *report.Process, tasks map[int]bool) {
	if c.dead != nil || !c.cfg.Resolve.Live {
		return
	}
	// Only a thread blocked in futex(2) can wait for a lock
	// (diagnose.WaitingFor): the child gets those.
	var blocked []report.Thread
	var at []int
	for i := range rp.Threads {
		if sc := rp.Threads[i].Syscall; sc != nil && sc.InCall && sc.Name == "futex" {
			blocked, at = append(blocked, rp.Threads[i]), append(at, i)
		}
	}
	up, asked, err := c.awaited(rp, kLocks)
	if asked || len(blocked) > 0 {
		if !asked {
			b := encodeReport(&report.Process{Threads: blocked})
			up, err = c.roundTrip(&downMsg{Kind: kLocks, Report: b, Tasks: sortedTasks(tasks)}, c.killAt())
		}
		waits := make([]*report.WaitingFor, len(blocked))
		if err == nil && up.Kind != kLocks {
			err = fmt.Errorf("answer %q", up.Kind)
		}
		if err == nil {
			// Each thread its own copy.
			err = untabulate(up.WaitTab, up.WaitOf, len(blocked), "thread", func(i int, w *report.WaitingFor) {
				if w != nil {
					x := *w
					// What the parent proves itself is not taken from
					// the child; a symbol's name is bounded.
					x.OwnerPID, x.OwnerComm = 0, ""
					if len(x.Symbol) > maxLockSymbol {
						x.Symbol = x.Symbol[:maxLockSymbol]
					}
					if w.OwnerTID != nil {
						o := *w.OwnerTID
						x.OwnerTID = &o
					}
					waits[i] = &x
				}
			})
		}
		if err != nil {
			rp.Warnings = append(rp.Warnings, fmt.Sprintf("lock owners not found: the sandboxed parser failed (%v)", err))
			return
		}
		names := make(map[int]string, len(rp.Threads))
		for i := range rp.Threads {
			names[rp.Threads[i].TID] = rp.Threads[i].ShownName(rp.Comm)
		}
		for k, w := range waits {
			if w != nil && w.OwnerTID != nil {
				if o := *w.OwnerTID; tasks[o] {
					w.OwnerName = names[o]
				} else {
					w.OwnerTID, w.OwnerName = nil, ""
				}
			}
			rp.Threads[at[k]].WaitingFor = w
		}
	}
	rp.Deadlocks = diagnose.Deadlocks(rp.Threads)
	rp.Diagnosed = true
}

// maxLockSymbol bounds a lock's name the child gives (a symbol and an
// offset).
const maxLockSymbol = 512

// LoadError is why a saved capture could not be read, as the child says:
// the file's fault, not the child's.
type LoadError struct {
	Why        string
	NotCapture bool // not a capture stackshot knows: Unwrap gives capfile.ErrNotCapture
}

func (e *LoadError) Error() string { return e.Why }

func (e *LoadError) Unwrap() error {
	if e.NotCapture {
		return capfile.ErrNotCapture
	}
	return nil
}

// SavedReport is what the child made of a saved capture.
type SavedReport struct {
	Procs []*report.Process
	// Lines are to be said on stderr: thread ids asked for that a process
	// lacks, a process that could not be shown, a failed child.
	Lines  []string
	Failed int // processes not shown (1 for the whole file when the child failed)
}

// Saved reads a saved capture, a capture file or an ELF core (f, opened
// by the parent, of size bytes), in the child and resolves its processes
// there, keeping only the threads tids names (all when empty): what
// report does in-process (capfile.Load, then resolve), the capture's
// bytes never parsed in the parent. The file's own faults come back as a
// *LoadError. A failed child costs the file (said in Lines): it was read
// only there.
func (c *Child) Saved(f *os.File, size int64, tids []int) (*SavedReport, error) {
	c.openNamespace(fileNamespace(f))
	up, err := c.roundTripFD(&downMsg{Kind: kSaved, TIDs: tids, Size: size}, int(f.Fd()), c.killAt())
	if err == nil && up.Kind != kSaved {
		err = fmt.Errorf("unexpected %q", up.Kind)
	}
	if err == nil && up.Err != "" {
		return nil, &LoadError{Why: up.Err, NotCapture: up.NotCapture}
	}
	if err == nil {
		if n := len(up.Procs); len(up.Missing) != n || len(up.Errs) != n || len(up.PIDs) != n {
			err = fmt.Errorf("%d processes, %d, %d and %d notes", n, len(up.Missing), len(up.Errs), len(up.PIDs))
		}
	}
	if err != nil {
		return &SavedReport{Failed: 1, Lines: []string{fmt.Sprintf("%s not shown: the sandboxed parser failed (%v)", f.Name(), err)}}, nil
	}
	c.expired = c.expired || up.Expired
	c.budget = c.budget || up.Budget
	r := &SavedReport{}
	for i, p := range up.Procs {
		if len(up.Missing[i]) > 0 {
			r.Lines = append(r.Lines, ptrace.MissingThreads(up.PIDs[i], up.Missing[i]))
		}
		switch {
		case up.Errs[i] != "":
			r.Lines = append(r.Lines, up.Errs[i])
			r.Failed++
		case p != nil:
			r.Procs = append(r.Procs, p)
		}
	}
	return r, nil
}
