//go:build linux

package sandbox

import (
	"fmt"
	"os"

	"stackshot/goruntime"
	"stackshot/internal/contain"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
)

// A runtime's lock owners (kRuntimeLocks): once the parent has diagnosed
// a report whose runtime frames the child read (kRuntime), the owner of
// each runtime lock a thread waits for that records one (a CPython
// threading.RLock) is read in the child too, as pyruntime's
// NameRLockOwners does in-process: a second round trip, made only when
// such a wait is there, with the runtime's file handed over again.

// maxRuntimeNote bounds what the child may add to a wait's note.
const maxRuntimeNote = 512

// RuntimeLocks names, in the child, the owners of the runtime name's
// locks ("python": threading.RLock) that rp's threads wait for (rp
// diagnosed, the waits' kinds said by pyruntime.NameLockWaits): m is the
// mapping whose file held the runtime (RuntimeFrames'), tasks the
// target's threads now. Only the threads waiting for an RLock whose owner
// is not named go down. What the child answers is checked (joinRuntimeLocks);
// what does not check out names no owner, and a warning says so.
func (c *Child) RuntimeLocks(p *ptrace.Process, rp *report.Process, name string, m *procmaps.Mapping, tasks map[int]bool) {
	if c.dead != nil || !c.cfg.Resolve.Live || m == nil {
		return
	}
	var asked []report.Thread
	var at []int
	for i := range rp.Threads {
		if w := rp.Threads[i].WaitingFor; w != nil && w.Kind == report.WaitPythonRLock && w.OwnerTID == nil {
			asked, at = append(asked, rp.Threads[i]), append(at, i)
		}
	}
	if len(asked) == 0 {
		return
	}
	c.follow(p)
	head := *p
	head.Threads = nil
	f, err := os.Open(procmaps.MapFilesPath(p.MemPID(), m))
	if err == nil {
		defer f.Close()
		mapping := *m
		b := encodeReport(&report.Process{Threads: asked})
		var up *upMsg
		up, err = c.roundTripFD(&downMsg{Kind: kRuntimeLocks, Proc: &head, Report: b, Runtime: name, Mapping: &mapping, Tasks: sortedTasks(tasks)}, int(f.Fd()), c.killAt())
		if err == nil {
			err = joinRuntimeLocks(rp, at, up, tasks)
		}
	}
	if err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("%s lock owners not read: the sandboxed parser failed (%v)", name, err))
	}
}

// joinRuntimeLocks puts the child's answer to kRuntimeLocks for rp's
// threads at (asked in that order) into their waits, once all of it
// checks out: one wait (or none) per thread asked, of the kind asked,
// its owner one of tasks, its note bounded. The owner's name is rp's.
func joinRuntimeLocks(rp *report.Process, at []int, up *upMsg, tasks map[int]bool) error {
	if up.Kind != kRuntimeLocks {
		return fmt.Errorf("answer %q (%s)", up.Kind, up.Err)
	}
	if up.NotRuntime {
		return fmt.Errorf("the runtime's file holds no runtime now")
	}
	if up.Err != "" {
		return fmt.Errorf("%s", up.Err)
	}
	for _, i := range at {
		if i < 0 || i >= len(rp.Threads) || rp.Threads[i].WaitingFor == nil {
			return fmt.Errorf("thread %d was not asked about", i) // (the caller's own fault)
		}
	}
	got := make([]*report.WaitingFor, len(at))
	err := untabulate(up.WaitTab, up.WaitOf, len(at), "thread", func(i int, w *report.WaitingFor) { got[i] = w })
	if err != nil {
		return err
	}
	for k, w := range got {
		if w == nil {
			continue
		}
		asked := rp.Threads[at[k]].WaitingFor
		switch {
		case w.Kind != asked.Kind:
			return fmt.Errorf("thread %d: a %q wait answered for a %q one", rp.Threads[at[k]].TID, w.Kind, asked.Kind)
		case w.OwnerTID != nil && !tasks[*w.OwnerTID]:
			return fmt.Errorf("thread %d: owner %d is no thread of the process", rp.Threads[at[k]].TID, *w.OwnerTID)
		case len(w.Note) > len(asked.Note)+maxRuntimeNote:
			return fmt.Errorf("thread %d: a %d-byte note", rp.Threads[at[k]].TID, len(w.Note))
		}
	}
	names := make(map[int]string, len(rp.Threads))
	for i := range rp.Threads {
		names[rp.Threads[i].TID] = rp.Threads[i].ShownName(rp.Comm)
	}
	for k, w := range got {
		if w == nil {
			continue
		}
		x := rp.Threads[at[k]].WaitingFor
		x.Address, x.Note = w.Address, w.Note
		if w.OwnerTID != nil {
			o := *w.OwnerTID
			x.OwnerTID, x.OwnerName = &o, names[o]
		}
	}
	return nil
}

// runtimeLocks answers kRuntimeLocks in the child: the runtime m.Runtime
// is opened again from the file f (m.Mapping's, handed over by the
// parent, closed here) and the target's memory, its threads read and
// matched to m.Tasks, and the owners of the locks m's threads wait for
// named; the answer is each thread's wait, in m's order.
func runtimeLocks(m *downMsg, memc *memClient, f *os.File) (up upMsg) {
	defer f.Close()
	up.Kind = kRuntimeLocks
	st, err := f.Stat()
	if m.Runtime != runtimePython || memc == nil || err != nil {
		up.NotRuntime = true
		return up
	}
	bias, ok := goruntime.LoadBias(f, m.Mapping.Start, m.Mapping.Offset)
	if !ok {
		up.NotRuntime = true
		return up
	}
	out := &report.Process{Threads: m.report.Threads}
	mod := pyruntime.Module{Path: m.Mapping.Path, File: f, Size: st.Size(), Bias: bias}
	tids := make(map[int]bool, len(m.Tasks))
	for _, t := range m.Tasks {
		tids[t] = true
	}
	if err := contain.Call("reading Python lock owners", func() {
		rt, err := pyruntime.Open(memc.direct(), []pyruntime.Module{mod})
		if err != nil {
			up.Err = err.Error()
			return
		}
		threads, _ := rt.Threads() // (those read before a bad one: as in-process)
		rt.MatchTIDs(threads, tids)
		rt.NameRLockOwners(out, threads)
	}); err != nil {
		up.Err = err.Error()
	}
	if up.Err != "" {
		return up
	}
	waits := make([]*report.WaitingFor, len(out.Threads))
	for i := range out.Threads {
		waits[i] = out.Threads[i].WaitingFor
	}
	up.WaitTab, up.WaitOf = shareWaits(waits)
	return up
}
