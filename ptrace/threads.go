package ptrace

import (
	"fmt"
	"strconv"
	"strings"
)

// KeepThreads keeps only the threads whose ids are in tids (all when tids is
// empty), in their order, and returns the ids asked for that it lacks.
func (p *Process) KeepThreads(tids []int) (missing []int) {
	if len(tids) == 0 {
		return nil
	}
	want := make(map[int]bool, len(tids))
	for _, t := range tids {
		want[t] = true
	}
	kept := p.Threads[:0]
	for _, th := range p.Threads {
		if want[th.TID] {
			kept = append(kept, th)
			delete(want, th.TID)
		}
	}
	p.Threads = kept
	for _, t := range tids {
		if want[t] {
			missing = append(missing, t)
			delete(want, t)
		}
	}
	return missing
}

// Keep is KeepThreads (a saved capture has every thread) saying through
// say, in the contract's words (MissingThreads), which are missing; false
// when no thread is left.
func (p *Process) Keep(tids []int, say func(string)) bool {
	if missing := p.KeepThreads(tids); len(missing) > 0 {
		say(MissingThreads(p.PID, missing))
	}
	return len(p.Threads) > 0
}

// MissingThreads says that the thread ids asked for (--tid) are not in
// process pid (for a sandboxed child's process too, which the parent
// knows only by its ids).
func MissingThreads(pid int, missing []int) string {
	ids := make([]string, len(missing))
	for i, t := range missing {
		ids[i] = strconv.Itoa(t)
	}
	return fmt.Sprintf("no thread %s in process %d (the capture has no such thread; check the ids, e.g. with 'ls /proc/%d/task')",
		strings.Join(ids, ", "), pid, pid)
}
