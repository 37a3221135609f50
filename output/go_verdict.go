package output

import (
	"fmt"
	"sort"

	"stackshot/report"
)

// goBlockedReason tells the wait reasons of goroutines blocked on
// something of the program's own (a channel, a select, a WaitGroup, a
// condition, I/O): a group of them waiting alike is what a leak or a
// stalled pipeline looks like. Locks are goLockReasons.
func goBlockedReason(r string) bool {
	switch r {
	case "chan receive", "chan send", "chan receive (nil chan)", "chan send (nil chan)",
		"select", "select (no cases)", "sync.WaitGroup.Wait", "sync.Cond.Wait", "IO wait",
		"semacquire", "sync.RWMutex.Lock", "sync.RWMutex.RLock", "sync.Mutex.Lock":
		return true
	}
	return false
}

// minGoGroup is the smallest group of goroutines waiting alike that the
// verdict names: one goroutine waiting is a program's ordinary state.
const minGoGroup = 2

// goroutineGroupWait is the verdict's part about the largest group of a
// Go program's goroutines blocked alike (same wait reason, same code: the
// first frame outside the runtime and sync): "1000 goroutines wait for
// chan receive in main.leak (main.go:31), the longest for 3 minutes".
// Among groups of one size, the reason then the code in byte order. ""
// when there is no group of minGoGroup. locksSaid: the goroutines waiting
// on locks were said already (goroutineLockWaits).
func goroutineGroupWait(p *report.Process, locksSaid bool) string {
	type key struct{ reason, fn string }
	count := map[key]int{}
	where := map[key]string{}
	longest := map[key]int64{}
	for i := range p.Goroutines {
		g := &p.Goroutines[i]
		if !goBlockedReason(g.WaitReason) || (locksSaid && goLockReasons[g.WaitReason]) {
			continue
		}
		fn, at := goCallerAt(g.Frames)
		k := key{g.WaitReason, fn}
		if count[k] == 0 {
			where[k] = at
		}
		count[k]++
		if g.HasWaiting {
			longest[k] = max(longest[k], g.WaitingNS)
		}
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if count[a] != count[b] {
			return count[a] > count[b]
		}
		if a.reason != b.reason {
			return a.reason < b.reason
		}
		return a.fn < b.fn
	})
	if len(keys) == 0 || count[keys[0]] < minGoGroup {
		return ""
	}
	k := keys[0]
	out := fmt.Sprintf("%d goroutines wait for %s in %s", count[k], k.reason, k.fn)
	if where[k] != "" {
		out += " (" + where[k] + ")"
	}
	if m := longest[k] / 60e9; m >= 1 {
		out += fmt.Sprintf(", the longest for %d minute%s", m, plural(int(m)))
	}
	return out
}

// goCallerAt is goCaller and where in its source the goroutine waits:
// "main.go:31" (the file's last element), or "".
func goCallerAt(frames []report.Frame) (string, string) {
	fn := goCaller(frames)
	for i := range frames {
		f := &frames[i]
		if f.Function == fn && f.Kind == "user" {
			if f.File == "" || f.Line == 0 {
				return fn, ""
			}
			file := f.File
			for j := len(file) - 1; j >= 0; j-- {
				if file[j] == '/' {
					file = file[j+1:]
					break
				}
			}
			return fn, fmt.Sprintf("%s:%d", file, f.Line)
		}
	}
	return fn, ""
}
