package report

import (
	"sort"
	"strings"
)

// GroupKey is the key under which stacks are grouped (--group): their
// sequence of function names, innermost first (unknown frames by module
// and offset), so stacks that differ only in addresses inside the same
// functions fold together. Threads and goroutines use the same key.
func GroupKey(frames []Frame) string {
	var b strings.Builder
	for i := range frames {
		f := &frames[i]
		if f.Kind == "kernel" {
			continue
		}
		switch {
		case f.Function != "":
			b.WriteString(f.Function)
		case f.Module != "":
			b.WriteString(f.Module)
		default:
			b.WriteString("??")
		}
		b.WriteByte(0)
	}
	return b.String()
}

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
		k := GroupKey(g.Frames)
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
