package ptrace

import (
	"fmt"
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
// say, in the contract's words, which are missing; false when no thread
// is left.
func (p *Process) Keep(tids []int, say func(string)) bool {
	if missing := p.KeepThreads(tids); len(missing) > 0 {
		say(fmt.Sprintf("no thread %s in process %d (the capture has no such thread; check the ids, e.g. with 'ls /proc/%d/task')",
			joinInts(missing), p.PID, p.PID))
	}
	return len(p.Threads) > 0
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
