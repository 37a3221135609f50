// Package diagnose answers what a hung process's threads wait for: which
// lock each blocked thread waits on and who holds it, the cycles of that
// wait-for graph (deadlocks), groups of threads with the same stack, and
// whether threads make progress across snapshots.
//
// It reads a resolved report (package report) and the target's memory
// through an io.ReaderAt (ptrace.MemReader for a live target, which uses
// process_vm_readv and needs no stop), after every thread runs again.
//
// Lock layouts are glibc's for x86-64 (bits/struct_mutex.h,
// bits/struct_rwlock.h, bits/thread-shared-types.h of glibc 2.3x) and the
// kernel's futex protocol (linux/futex.h). Everything read from the target
// is hostile: a lock is trusted only when the stack shows the thread in
// that lock's slow path and every field passes its check; otherwise the
// owner is unknown. A wrong owner is worse than none.
package diagnose

import (
	"io"
	"strings"

	"stackshot/report"
)

// Diagnose fills in what p's blocked threads wait for (Thread.WaitingFor)
// and the deadlocks among them (Process.Deadlocks). mem reads the target's
// memory; tasks is the set of the process's threads now (an owner must be
// one of them). It never fails: what cannot be read or proved is unknown.
func Diagnose(p *report.Process, mem io.ReaderAt, tasks map[int]bool) {
	names := map[int]string{}
	for i := range p.Threads {
		names[p.Threads[i].TID] = p.Threads[i].ShownName(p.Comm)
	}
	for i := range p.Threads {
		t := &p.Threads[i]
		if w := t.WaitingFor; w == nil || !report.RuntimeWait(w.Kind) {
			// (a runtime's own record of a wait beats the native lock
			// its thread blocks in)
			t.WaitingFor = WaitingFor(t, mem, tasks)
		}
		if w := t.WaitingFor; w != nil && w.OwnerTID != nil {
			w.OwnerName = names[*w.OwnerTID]
		}
	}
	staleOwners(p.Threads, mem)
	inferPIParked(p.Threads, names)
	p.Deadlocks = Deadlocks(p.Threads)
	p.Diagnosed = true
}

// inferPIParked names the owner a thread parked after EDEADLK waits for
// when its mutex could not be found. The kernel refused its FUTEX_LOCK_PI
// because the owner of the mutex it wanted is blocked on a chain of PI
// futexes that ends at the parked thread itself; if exactly one thread's
// chain of PI waits ends there, that thread is the owner. Only done when
// the owner of every PI wait is known (an unknown edge could hide a second
// candidate).
func inferPIParked(threads []report.Thread, names map[int]string) {
	next := map[int]int{}
	for i := range threads {
		w := threads[i].WaitingFor
		if w == nil || w.Kind != report.WaitPIMutex || strings.HasPrefix(w.Note, notePIParked) {
			continue
		}
		if w.OwnerTID == nil {
			return
		}
		next[threads[i].TID] = *w.OwnerTID
	}
	for i := range threads {
		t := &threads[i]
		w := t.WaitingFor
		if w == nil || !strings.HasPrefix(w.Note, notePIParked) || w.OwnerTID != nil {
			continue
		}
		var cands []int
		for start := range next {
			cur := start
			for steps := 0; steps <= len(next); steps++ {
				n, ok := next[cur]
				if !ok {
					break
				}
				if n == t.TID {
					cands = append(cands, start)
					break
				}
				cur = n
			}
		}
		if len(cands) == 1 {
			o := cands[0]
			w.OwnerTID, w.OwnerName = &o, names[o]
			w.Note += "; its owner is the one thread whose PI waits lead back to it"
		}
	}
}

// Group sets p.Groups: threads with the same function sequence, largest
// group first.
func Group(p *report.Process) {
	p.Groups = report.GroupThreads(p.Threads, p.Comm)
}
