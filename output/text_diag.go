package output

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"stackshot/internal/term"
	"stackshot/report"
	"strings"
)

// kindText is how text names what a thread waits for.
func kindText(kind string) string {
	switch kind {
	case report.WaitCondvar:
		return "condition variable"
	case report.WaitRustMutex:
		return "Rust std Mutex"
	case report.WaitMonitor:
		return "Java monitor"
	case report.WaitObjectWait:
		return "notify on"
	case report.WaitJUCLock:
		return "java.util.concurrent lock"
	case "":
		return "lock"
	}
	return kind
}

func ownerText(tid int, name string) string {
	if name == "" {
		return fmt.Sprintf("thread %d", tid) // not in the report (-t)
	}
	return fmt.Sprintf("thread %d %q", tid, name)
}

// waitText describes a wait: `mutex 0x… held by thread 1236 "b"`.
func waitText(w *report.WaitingFor) string {
	var b strings.Builder
	b.WriteString(kindText(w.Kind))
	if w.Address != 0 {
		fmt.Fprintf(&b, " %#x", w.Address)
	} else {
		b.WriteString(" at an unknown address")
	}
	if w.Class != "" {
		fmt.Fprintf(&b, " (a %s)", term.Escape(w.Class))
	}
	if w.OwnerTID != nil {
		b.WriteString(" held by ")
		b.WriteString(ownerText(*w.OwnerTID, w.OwnerName))
	}
	return b.String()
}

// waitLine is the line under a blocked thread's system call.
func waitLine(t *report.Thread) string {
	w := t.WaitingFor
	if w == nil {
		return ""
	}
	s := "    --- waiting for " + waitText(w)
	switch {
	case w.OwnerTID != nil:
	case w.Note != "":
		s += " (owner unknown: " + w.Note + ")"
	default:
		s += " (owner unknown)"
	}
	return s + " ---\n"
}

// progressMark follows the thread header: " [stuck 4.0s]", " [spinning]".
func progressMark(t *report.Thread) string {
	switch t.Progress {
	case report.ProgressStuck:
		return fmt.Sprintf(" [stuck %.1fs]", t.SameStackS)
	case report.ProgressSpinning:
		return " [spinning]"
	}
	return ""
}

// textDiagnosis writes the verdict, the deadlocks and the progress summary
// right under the process header.
func textDiagnosis(w *bufio.Writer, p *report.Process) {
	if !p.Diagnosed && p.ProgressSummary == nil {
		return
	}
	fmt.Fprintf(w, "Verdict: %s\n", Verdict(p))
	byTID := map[int]*report.Thread{}
	for i := range p.Threads {
		byTID[p.Threads[i].TID] = &p.Threads[i]
	}
	for _, d := range p.Deadlocks {
		w.WriteString(deadlockLine(d, byTID) + "\n")
	}
	if s := p.ProgressSummary; s != nil {
		fmt.Fprintf(w, "Progress over %d snapshots %.1fs apart: %d stuck, %d spinning, %d moving\n",
			s.Snapshots, s.IntervalS, s.Stuck, s.Spinning, s.Moving)
	}
}

func threadRef(tid int, byTID map[int]*report.Thread) string {
	name := ""
	if t := byTID[tid]; t != nil {
		name = t.Name
	}
	return ownerText(tid, name)
}

// deadlockLine: DEADLOCK: thread 1235 "a" waits for mutex 0x… held by
// thread 1236 "b", which waits for mutex 0x… held by thread 1235 "a".
func deadlockLine(d report.Deadlock, byTID map[int]*report.Thread) string {
	var b strings.Builder
	b.WriteString("DEADLOCK: ")
	n := len(d.TIDs)
	for i, tid := range d.TIDs {
		kind, class := report.WaitMutex, ""
		if t := byTID[tid]; t != nil && t.WaitingFor != nil {
			kind, class = t.WaitingFor.Kind, t.WaitingFor.Class
		}
		if i == 0 {
			b.WriteString(threadRef(tid, byTID))
			b.WriteString(" waits for ")
		} else {
			b.WriteString(", which waits for ")
		}
		b.WriteString(kindText(kind))
		if d.Addresses[i] != 0 {
			fmt.Fprintf(&b, " %#x", d.Addresses[i])
		} else {
			b.WriteString(" at an unknown address")
		}
		if class != "" {
			fmt.Fprintf(&b, " (a %s)", term.Escape(class))
		}
		b.WriteString(" held by " + threadRef(d.TIDs[(i+1)%n], byTID))
	}
	return b.String()
}

// Verdict is the one line that says what matters most: deadlock cycles,
// then the largest group of threads waiting for the same thing, then the
// threads that are stuck.
func Verdict(p *report.Process) string {
	var parts []string
	if n := len(p.Deadlocks); n > 0 {
		var tids []string
		for _, d := range p.Deadlocks {
			for _, t := range d.TIDs {
				tids = append(tids, fmt.Sprint(t))
			}
		}
		level := ""
		if javaCycles(p) {
			level = "Java-level " // (as jstack says it)
		}
		cyc := "a " + level + "deadlock"
		if n > 1 {
			cyc = fmt.Sprintf("%d %sdeadlocks", n, level)
		}
		parts = append(parts, fmt.Sprintf("%s (threads %s)", cyc, strings.Join(tids, ", ")))
	}
	type target struct {
		kind  string
		addr  uint64
		owner int
	}
	inCycle := map[int]bool{}
	for _, d := range p.Deadlocks {
		for _, t := range d.TIDs {
			inCycle[t] = true
		}
	}
	counts := map[target]int{}
	names := map[target][]string{}
	var example = map[target]*report.WaitingFor{}
	for i := range p.Threads {
		w := p.Threads[i].WaitingFor
		if w == nil || inCycle[p.Threads[i].TID] {
			continue
		}
		k := target{w.Kind, w.Address, -1}
		if w.OwnerTID != nil {
			k.owner = *w.OwnerTID
		}
		counts[k]++
		names[k] = append(names[k], p.Threads[i].Name)
		if example[k] == nil {
			example[k] = w
		}
	}
	if len(counts) > 0 {
		keys := make([]target, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if counts[keys[i]] != counts[keys[j]] {
				return counts[keys[i]] > counts[keys[j]]
			}
			return keys[i].addr < keys[j].addr
		})
		top := keys[0]
		n := counts[top]
		verb := "waits"
		if n > 1 {
			verb = "wait"
		}
		parts = append(parts, fmt.Sprintf("%d thread%s (%s) %s for %s", n, plural(n),
			strings.Join(quoteAll(report.FoldNames(names[top])), ", "), verb, waitText(example[top])))
	}
	if g := goroutineLockWaits(p); g != "" {
		parts = append(parts, g)
	}
	if s := p.ProgressSummary; s != nil && s.Stuck+s.Spinning > 0 {
		var ps []string
		if s.Stuck > 0 {
			ps = append(ps, fmt.Sprintf("%d thread%s stuck", s.Stuck, plural(s.Stuck)))
		}
		if s.Spinning > 0 {
			ps = append(ps, fmt.Sprintf("%d spinning", s.Spinning))
		}
		parts = append(parts, strings.Join(ps, ", ")+fmt.Sprintf(" over %d snapshots", s.Snapshots))
	}
	if len(parts) == 0 {
		return "no deadlock found, no thread waits on a lock"
	}
	if len(p.Deadlocks) == 0 {
		parts = append([]string{"no deadlock found"}, parts...)
	}
	return strings.Join(parts, "; ")
}

// goLockReasons are the wait reasons of goroutines blocked on a Go lock:
// the runtime records no owner, so they cannot join a deadlock cycle, but
// they are what a hang of a Go program usually is.
var goLockReasons = map[string]bool{"sync.Mutex.Lock": true, "sync.RWMutex.Lock": true, "sync.RWMutex.RLock": true}

// goroutineLockWaits is the verdict's part about a Go program's
// goroutines blocked on locks: the reason most of them wait for, where
// (the first function outside the runtime and sync), for how long, and
// whether any goroutine runs at all; "" when none waits on a lock.
func goroutineLockWaits(p *report.Process) string {
	byReason := map[string]int{}
	running := false
	for i := range p.Goroutines {
		g := &p.Goroutines[i]
		switch {
		case goLockReasons[g.WaitReason]:
			byReason[g.WaitReason]++
		case g.OnThread(), g.Runnable():
			running = true
		}
	}
	reason, n := "", 0
	for r, c := range byReason {
		if c > n || c == n && r < reason {
			reason, n = r, c
		}
	}
	if n == 0 {
		return ""
	}
	where := map[string]int{}
	var order []string
	var longest int64
	for i := range p.Goroutines {
		g := &p.Goroutines[i]
		if g.WaitReason != reason {
			continue
		}
		fn := goCaller(g.Frames)
		if where[fn] == 0 {
			order = append(order, fn)
		}
		where[fn]++
		if g.HasWaiting {
			longest = max(longest, g.WaitingNS)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return where[order[i]] > where[order[j]] })
	var at []string
	for i, fn := range order {
		if i == 3 {
			at = append(at, fmt.Sprintf("%d more", len(order)-i))
			break
		}
		at = append(at, fmt.Sprintf("%d in %s", where[fn], fn))
	}
	verb := "waits"
	if n > 1 {
		verb = "wait"
	}
	out := fmt.Sprintf("%d goroutine%s %s for %s (%s)", n, plural(n), verb, reason, strings.Join(at, ", "))
	if m := longest / 60e9; m >= 1 {
		out += fmt.Sprintf(", the longest for %d minute%s", m, plural(int(m)))
	}
	if !running {
		out += ", and no goroutine runs"
	}
	return out
}

// goCaller is the first function of a goroutine's frames outside the
// runtime and the sync packages: the code that asked for the lock.
func goCaller(frames []report.Frame) string {
	for i := range frames {
		fn := frames[i].Function
		if fn == "" || frames[i].Kind != "user" {
			continue
		}
		switch {
		case strings.HasPrefix(fn, "runtime."), strings.HasPrefix(fn, "sync."), strings.HasPrefix(fn, "internal/sync."):
			continue
		}
		return fn
	}
	return "unknown code"
}

// textGroups writes the threads folded into groups (p.Groups); false when
// grouping is off.
func textGroups(w *bufio.Writer, p *report.Process, o TextOptions) bool {
	if p.Groups == nil {
		return false
	}
	for gi := range p.Groups {
		g := &p.Groups[gi]
		if len(g.Members) == 0 || g.Members[0] >= len(p.Threads) {
			continue
		}
		first := &p.Threads[g.Members[0]]
		if g.Count == 1 {
			textThread(w, first, o)
			continue
		}
		// The first member's rendering, under a header for the group.
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		textThread(bw, first, o)
		bw.Flush()
		body := strings.TrimPrefix(buf.String(), "\n")
		if i := strings.IndexByte(body, '\n'); i >= 0 {
			body = body[i+1:]
		}
		fmt.Fprintf(w, "\n%d threads %s (state %s", g.Count, strings.Join(quoteAll(g.Names), ", "), first.State)
		if first.Syscall != nil && first.Syscall.InCall {
			fmt.Fprintf(w, ", in %s", first.Syscall.Name)
		}
		fmt.Fprintf(w, "): %s%s\n", tidRanges(g.TIDs), groupMark(p, g))
		w.WriteString(body)
		groupWaits(w, p, g, first)
	}
	return true
}

// groupMark is the progress mark of a group whose members all share it.
func groupMark(p *report.Process, g *report.Group) string {
	first := &p.Threads[g.Members[0]]
	for _, m := range g.Members[1:] {
		if p.Threads[m].Progress != first.Progress {
			return ""
		}
	}
	return progressMark(first)
}

// groupWaits lists what the other members wait for when it differs from
// the first member's.
func groupWaits(w *bufio.Writer, p *report.Process, g *report.Group, first *report.Thread) {
	want := waitLine(first)
	other := map[string]int{}
	var order []string
	for _, m := range g.Members[1:] {
		l := waitLine(&p.Threads[m])
		if l == want {
			continue
		}
		if other[l] == 0 {
			order = append(order, l)
		}
		other[l]++
	}
	for _, l := range order {
		if l == "" {
			fmt.Fprintf(w, "    (%d of them wait for nothing known)\n", other[l])
			continue
		}
		fmt.Fprintf(w, "    (%d of them: %s)\n", other[l], strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(l), "--- "), " ---"))
	}
}

func quoteAll(v []string) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// tidRanges writes sorted TIDs with runs folded: 1001-1064, 1070.
func tidRanges(tids []int) string {
	s := append([]int(nil), tids...)
	sort.Ints(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, fmt.Sprint(s[i]))
		}
		i = j + 1
	}
	return "threads " + strings.Join(parts, ", ")
}

// javaCycles reports whether every thread of p's deadlocks waits for a
// Java monitor or java.util.concurrent lock.
func javaCycles(p *report.Process) bool {
	waits := map[int]*report.WaitingFor{}
	for i := range p.Threads {
		waits[p.Threads[i].TID] = p.Threads[i].WaitingFor
	}
	for _, d := range p.Deadlocks {
		for _, tid := range d.TIDs {
			if w := waits[tid]; w == nil || !report.RuntimeWait(w.Kind) {
				return false
			}
		}
	}
	return true
}
