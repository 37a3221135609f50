package ptrace

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
