//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"

	"stackshot/capfile"
	"stackshot/diagnose"
	"stackshot/goruntime"
	"stackshot/internal/contain"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// The child's work beyond unwinding and naming: a Go program's goroutines,
// the owners of the locks threads wait for, and saved captures (capture
// files and ELF cores).

// goroutines reads the goroutines of m.Proc (a live Go program) from its
// memory and its executable exe (handed over by the parent, closed here),
// their frames named by the resolver that named the threads: what
// goruntime.Live does in-process. The answer holds only Runtime,
// Goroutines, GoroutinesSkipped and the new Warnings.
func goroutines(cfg *setup, res *resolve.Resolver, m *downMsg, memc *memClient, exe *os.File) *report.Process {
	defer exe.Close()
	out := &report.Process{Threads: m.report.Threads}
	if memc == nil {
		return &report.Process{}
	}
	space := res.Space(m.Proc, memc)
	if err := contain.Call("reading goroutines", func() {
		goruntime.LiveFrom(m.Proc, out, goruntime.SymbolizerFunc(res.Namer(space)), memc.direct(), exe, cfg.Deadline, nil)
	}); err != nil {
		out.Goroutines = nil
		out.Warnings = append(out.Warnings, fmt.Sprintf("goroutines not read (%v)", err))
	}
	out.Threads = nil
	return out
}

// shareStacks takes the goroutines' frames out into a table of distinct
// stacks (goruntime shares one slice among the goroutines with the same
// stack), each goroutine pointing into it: thousands of goroutines parked
// at the same place cross the socket once.
func shareStacks(gs []report.Goroutine) (stacks [][]report.Frame, of []int) {
	type key struct {
		first *report.Frame
		n     int
	}
	all := make([][]report.Frame, len(gs))
	for i := range gs {
		all[i], gs[i].Frames = gs[i].Frames, nil
	}
	return tabulate(all, func(fr []report.Frame) (key, bool) {
		if len(fr) == 0 {
			return key{}, false
		}
		return key{&fr[0], len(fr)}, true
	})
}

// locks finds what m.report's blocked threads wait for and who holds it
// (diagnose.Diagnose), reading the lock words from the target's memory.
func locks(m *downMsg, res *resolve.Resolver, memc *memClient) ([]*report.WaitingFor, []report.Deadlock) {
	tasks := make(map[int]bool, len(m.Tasks))
	for _, t := range m.Tasks {
		tasks[t] = true
	}
	var mem io.ReaderAt
	if memc != nil {
		mem = memc.direct()
	}
	p := m.report
	waits := make([]*report.WaitingFor, len(p.Threads))
	if err := contain.Call("finding lock owners", func() {
		diagnose.Diagnose(p, mem, tasks)
		if m.Proc != nil && res != nil && mem != nil {
			// Globals and statics by name, from the files parsed here.
			diagnose.NameLocks(p, res.Space(m.Proc, mem).DataName)
		}
	}); err != nil {
		return waits, nil
	}
	for i := range p.Threads {
		waits[i] = p.Threads[i].WaitingFor
	}
	return waits, p.Deadlocks
}

// shareWaits is waits as a table of the distinct ones and each thread's
// index in it (nil: -1).
func shareWaits(waits []*report.WaitingFor) ([]*report.WaitingFor, []int) {
	type key struct {
		report.WaitingFor
		owner int
	}
	return tabulate(waits, func(w *report.WaitingFor) (key, bool) {
		if w == nil {
			return key{}, false
		}
		k := key{WaitingFor: *w, owner: -1}
		if w.OwnerTID != nil {
			k.owner = *w.OwnerTID
		}
		k.OwnerTID = nil
		return k, true
	})
}

// saved reads a saved capture, a capture file or an ELF core (handed over
// by the parent, closed here), and resolves its processes as report does
// in-process: only the threads m.TIDs names (all when empty), a core's
// build ids read from its memory when its writer did not record them.
func saved(cfg *setup, sym *symtab.Symbolizer, m *downMsg, f *os.File) upMsg {
	defer f.Close()
	up := upMsg{Kind: kSaved}
	var all []capfile.Saved
	err := contain.Do("reading the capture", func() error {
		var err error
		all, err = capfile.Load(f, m.Size)
		return err
	})
	if err != nil {
		up.Err, up.NotCapture = err.Error(), errors.Is(err, capfile.ErrNotCapture)
		return up
	}
	for _, sv := range all {
		p := sv.Process
		tasks := capfile.Tasks(p)
		missing := p.KeepThreads(m.TIDs)
		var rp *report.Process
		var why string
		if len(p.Threads) > 0 {
			res := resolve.NewResolver(sym, resolve.Options{MaxFrames: cfg.MaxFrames, Kernel: cfg.Kernel && sv.Kernel,
				Sysroot: cfg.Sysroot, Exe: cfg.Exe})
			if err := contain.Call(fmt.Sprintf("resolving process %d", p.PID), func() {
				if sv.Mem != nil && p.BuildIDs == nil {
					resolve.LinkMapModules(p, sv.Mem, sym, cfg.Sysroot, cfg.Exe) // a core that names no files
					resolve.CollectImages(p, sv.Mem)                             // a core of another tool
				}
				rp = res.Process(p, sv.Mem)
				if sv.Mem != nil {
					// A core's lock words, read and interpreted here.
					diagnose.Saved(rp, sv.Mem, tasks, res.Space(p, sv.Mem).DataName)
				}
			}); err != nil {
				rp, why = nil, fmt.Sprintf("cannot show process %d (%v)", p.PID, err)
			} else {
				rp.Warnings = append(rp.Warnings, sv.Warnings...)
			}
		}
		up.Procs = append(up.Procs, rp)
		up.Missing = append(up.Missing, missing)
		up.Errs = append(up.Errs, why)
		up.PIDs = append(up.PIDs, p.PID)
	}
	return up
}
