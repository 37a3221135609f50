package diagnose

import (
	"sort"

	"stackshot/report"
)

// Deadlocks finds the cycles of the wait-for graph: an edge goes from each
// thread whose lock owner is known to that owner. A thread waits for one
// lock at a time, so each thread has at most one edge and every cycle is
// found by following edges. Each cycle starts at its lowest TID; cycles
// are sorted by that TID. A thread that waits for a lock it holds itself
// is a cycle of one.
func Deadlocks(threads []report.Thread) []report.Deadlock {
	next := map[int]int{}
	addr := map[int]uint64{}
	for i := range threads {
		t := &threads[i]
		if w := t.WaitingFor; w != nil && w.OwnerTID != nil {
			next[t.TID] = *w.OwnerTID
			addr[t.TID] = w.Address
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[int]int{}
	var out []report.Deadlock
	tids := make([]int, 0, len(next))
	for tid := range next {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	for _, start := range tids {
		if state[start] != unseen {
			continue
		}
		var path []int
		cur := start
		for {
			if state[cur] == onPath {
				// A cycle: the path from cur's first appearance.
				i := 0
				for path[i] != cur {
					i++
				}
				out = append(out, cycle(path[i:], addr))
				break
			}
			if state[cur] == done {
				break
			}
			state[cur] = onPath
			path = append(path, cur)
			n, ok := next[cur]
			if !ok {
				break
			}
			cur = n
		}
		for _, p := range path {
			state[p] = done
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TIDs[0] < out[j].TIDs[0] })
	return out
}

// cycle rotates a cycle to start at its lowest TID.
func cycle(c []int, addr map[int]uint64) report.Deadlock {
	lo := 0
	for i := range c {
		if c[i] < c[lo] {
			lo = i
		}
	}
	d := report.Deadlock{}
	for k := 0; k < len(c); k++ {
		tid := c[(lo+k)%len(c)]
		d.TIDs = append(d.TIDs, tid)
		d.Addresses = append(d.Addresses, addr[tid])
	}
	return d
}
