package report

import (
	"sort"
	"strconv"
	"strings"
)

// GroupGoroutines folds goroutines whose function sequences are equal,
// largest group first (then by first goroutine id).
func GroupGoroutines(gs []Goroutine) []GoroutineGroup {
	idx := map[string]int{}
	var out []GoroutineGroup
	for i := range gs {
		g := &gs[i]
		status := g.Status
		if g.WaitReason != "" {
			status = g.WaitReason
		}
		k := StackKey(g.Frames)
		j, ok := idx[k]
		if !ok {
			j = len(out)
			idx[k] = j
			out = append(out, GoroutineGroup{Status: status, Frames: g.Frames, CreatedBy: g.CreatedBy})
		}
		grp := &out[j]
		grp.GoIDs = append(grp.GoIDs, g.GoID)
		if grp.Status != status {
			grp.Status = ""
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		if len(out[a].GoIDs) != len(out[b].GoIDs) {
			return len(out[a].GoIDs) > len(out[b].GoIDs)
		}
		return out[a].GoIDs[0] < out[b].GoIDs[0]
	})
	return out
}

// StackKey is the function sequence that decides whether two stacks are
// the same: every frame's function name (module+offset when unnamed),
// innermost first.
func StackKey(frames []Frame) string {
	var b strings.Builder
	for i := range frames {
		f := &frames[i]
		if i > 0 {
			b.WriteByte('\n')
		}
		switch {
		case f.Function != "":
			b.WriteString(f.Function)
		case f.HasModule:
			b.WriteString(f.Module)
			b.WriteByte('+')
			b.WriteString(hexString(f.ModuleOffset))
		default:
			b.WriteString(hexString(f.PC))
		}
	}
	return b.String()
}

func hexString(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }

// GroupThreads folds threads with equal function sequences (StackKey) into
// groups, largest first (ties: lowest first TID). Every thread is in
// exactly one group; a thread alone is a group of one.
func GroupThreads(threads []Thread, comm string) []Group {
	byKey := map[string]int{}
	var groups []Group
	for i := range threads {
		k := StackKey(threads[i].Frames)
		gi, ok := byKey[k]
		if !ok {
			gi = len(groups)
			byKey[k] = gi
			groups = append(groups, Group{Frames: threads[i].Frames})
		}
		g := &groups[gi]
		g.Count++
		g.TIDs = append(g.TIDs, threads[i].TID)
		g.Members = append(g.Members, i)
	}
	for gi := range groups {
		g := &groups[gi]
		names := make([]string, len(g.Members))
		for j, m := range g.Members {
			names[j] = threads[m].ShownName(comm)
		}
		g.Names = FoldNames(names)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if groups[i].Count != groups[j].Count {
			return groups[i].Count > groups[j].Count
		}
		return groups[i].TIDs[0] < groups[j].TIDs[0]
	})
	return groups
}

// FoldNames returns the distinct names, sorted, with names that differ
// only in a trailing number folded to their stem and "*" (worker-1,
// worker-2 -> worker-*), or all of them to their common prefix when they
// share one of at least 3 bytes (locker-a, locker-b -> locker-*). At most
// 8 entries are returned; the rest are counted in a last "(N more)" entry.
func FoldNames(names []string) []string {
	stems := map[string]map[string]bool{}
	for _, n := range names {
		s := nameStem(n)
		if stems[s] == nil {
			stems[s] = map[string]bool{}
		}
		stems[s][n] = true
	}
	var out []string
	for s, set := range stems {
		if len(set) > 1 {
			out = append(out, s+"*")
			continue
		}
		for n := range set {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	if len(out) > 1 {
		// Names that all share a prefix fold to it: locker-a, locker-b
		// -> locker-*.
		pre := names[0]
		for _, n := range names[1:] {
			i := 0
			for i < len(pre) && i < len(n) && pre[i] == n[i] {
				i++
			}
			pre = pre[:i]
		}
		if len(pre) >= 3 {
			return []string{pre + "*"}
		}
	}
	const most = 8
	if len(out) > most {
		more := len(out) - most
		out = append(out[:most], "("+strconv.Itoa(more)+" more)")
	}
	return out
}

// nameStem drops a trailing number (and nothing else): "w-007" -> "w-",
// "pool-3-thread-12" -> "pool-3-thread-", "main" -> "main".
func nameStem(n string) string {
	i := len(n)
	for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
		i--
	}
	return n[:i]
}
