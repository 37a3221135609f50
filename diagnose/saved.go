package diagnose

import (
	"fmt"
	"io"

	"stackshot/report"
)

const noteForeignInCore = "; a core cannot prove which process (the TID it records is all there is)"

// Saved diagnoses a saved process (an ELF core) as Diagnose does a live
// one: mem is the core's memory, tasks every thread the core holds. A
// core that holds no lock's memory (stackshot's stacks-only core) says
// which answers it lacks. name names a lock by its symbol (NameLocks);
// nil: not named.
func Saved(p *report.Process, mem io.ReaderAt, tasks map[int]bool, name func(uint64) string) {
	Diagnose(p, mem, tasks)
	unread := 0
	for i := range p.Threads {
		w := p.Threads[i].WaitingFor
		if w != nil && w.Note == noteUnreadable {
			unread++
		}
		if w != nil && w.ForeignTID != 0 && w.OwnerPID == 0 {
			// (Live, /proc proves the owner's process; a core has no
			// /proc of the time, and the TID may name anything now.)
			w.Note += noteForeignInCore
		}
	}
	if unread > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("lock owners not known for %d thread(s): the core does not hold "+
			"the locks' memory (stackshot's --core-memory writable or all, or gcore, writes it)", unread))
	}
	if name != nil {
		NameLocks(p, name)
	}
}
