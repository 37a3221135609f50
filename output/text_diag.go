package output

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
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
	case report.WaitPythonLock, report.WaitPythonRLock:
		return "Python lock"
	case report.WaitMonitor:
		return "Java monitor"
	case report.WaitObjectWait:
		return "notify on"
	case report.WaitJUCLock:
		return "java.util.concurrent lock"
	case report.WaitPythonGIL:
		return "the GIL"
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

// waitText describes a wait: `mutex 0x… held by thread 1236 "b"`; a
// Python lock's class and owner are in parentheses: `Python lock 0x…
// (threading.RLock held by thread 2301 "worker-1")`.
func waitText(w *report.WaitingFor) string {
	if pythonLock(w.Kind) {
		return pythonWaitText(w, "")
	}
	var b strings.Builder
	b.WriteString(lockText(w.Kind, w.Address, w.Symbol))
	if w.Class != "" {
		fmt.Fprintf(&b, " (a %s)", term.Escape(w.Class))
	}
	if w.OwnerTID != nil {
		b.WriteString(heldBy(w.Kind))
		b.WriteString(ownerText(*w.OwnerTID, w.OwnerName))
		b.WriteString(ownerStateText(w.OwnerState))
	} else if w.OwnerPID != 0 {
		fmt.Fprintf(&b, " held by thread %d of process %d %q", w.ForeignTID, w.OwnerPID, w.OwnerComm)
	}
	return b.String()
}

// pythonLock reports whether kind is a CPython threading lock's.
func pythonLock(kind string) bool {
	return kind == report.WaitPythonLock || kind == report.WaitPythonRLock
}

// pythonWaitText is waitText of a Python lock, note (why its owner is not
// named) after its class when there is no owner: `Python lock 0x…
// (threading.Lock: it records no owner; asked at take (app.py:12))`.
func pythonWaitText(w *report.WaitingFor, note string) string {
	class := w.Class
	if class == "" { // (a report that does not say: the lock's own)
		class = "threading.Lock"
		if w.Kind == report.WaitPythonRLock {
			class = "threading.RLock"
		}
	}
	var b strings.Builder
	b.WriteString(lockText(w.Kind, w.Address, w.Symbol))
	b.WriteString(" (" + term.Escape(class))
	switch {
	case w.OwnerTID != nil:
		b.WriteString(heldBy(w.Kind) + ownerText(*w.OwnerTID, w.OwnerName) + ownerStateText(w.OwnerState))
	case note != "":
		b.WriteString(": " + term.Escape(note)) // (it names the target's Python code)
	}
	return b.String() + ")"
}

// ownerStateText is what a lock's owner is doing: `, itself blocked in
// read(7) on pipe:[8812]`; "" unknown.
func ownerStateText(st *report.OwnerState) string {
	switch {
	case st == nil:
		return ""
	case st.Waiting != nil:
		w := *st.Waiting
		w.OwnerState = nil
		return ", itself waiting for " + waitText(&w)
	case st.Syscall != "" && st.FD != nil:
		return fmt.Sprintf(", itself blocked in %s(%d) on %s", st.Syscall, st.FD.Num, fdText(st.FD))
	case st.Syscall != "":
		return ", itself blocked in " + st.Syscall
	case st.PythonAt != "":
		return ", which is running Python at " + st.PythonAt
	case st.State == "R":
		return ", itself running"
	}
	return ""
}

// fdText names a descriptor: its path, pipe or socket ends; the kind of
// an anonymous one (the target's strings escaped).
func fdText(f *report.FD) string {
	switch f.Kind {
	case report.FDFile, report.FDPipe, report.FDSocket:
		return term.Escape(f.Target)
	}
	return f.Kind
}

// fdSyscallLine is the system call line of a thread blocked on
// descriptors: `    --- read(7, …) on pipe:[8812] ---`, `    ---
// epoll_wait(5, …) on epoll watching 3: 4 tcp 127.0.0.1:6379 (listening),
// 6 pipe:[12], 7 eventfd ---`; "" when none was named.
func fdSyscallLine(t *report.Thread) string {
	fw := t.FDWait
	if fw == nil || t.Syscall == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("    --- " + t.Syscall.Name + "(")
	if fw.FD != nil {
		fmt.Fprintf(&b, "%d, …) on %s", fw.FD.Num, fdText(fw.FD))
	} else {
		b.WriteString("…)")
	}
	if fw.WatchedCount >= 0 || len(fw.Watched) > 0 {
		b.WriteString(" watching")
		if fw.WatchedCount >= 0 {
			fmt.Fprintf(&b, " %d", fw.WatchedCount)
		}
		for i := range fw.Watched {
			if i == 0 {
				b.WriteString(":")
			} else {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %d %s", fw.Watched[i].Num, fdText(&fw.Watched[i]))
		}
		if n := fw.WatchedCount - len(fw.Watched); n > 0 && len(fw.Watched) > 0 {
			fmt.Fprintf(&b, " and %d more", n)
		}
	}
	b.WriteString(" ---\n")
	return b.String()
}

// waitLine is the line under a blocked thread's system call.
func waitLine(t *report.Thread) string {
	w := t.WaitingFor
	if w == nil {
		return ""
	}
	if pythonLock(w.Kind) && w.OwnerTID == nil {
		return "    --- waiting " + waitVerb(w.Kind) + pythonWaitText(w, w.Note) + " ---\n"
	}
	s := "    --- waiting " + waitVerb(w.Kind) + waitText(w)
	switch {
	case w.OwnerTID != nil, w.OwnerPID != 0:
	case w.Note != "":
		s += " (owner unknown: " + term.Escape(w.Note) + ")" // (a note may name the target's symbols)
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
	case report.ProgressWaiting:
		if t.WakeNS > 0 {
			return " [waiting, wakes every ~" + period(t.WakeNS) + "]"
		}
		return " [waiting]"
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
		w.WriteString(deadlockLine(d, byTID, p.Comm) + "\n")
	}
	if s := p.ProgressSummary; s != nil {
		fmt.Fprintf(w, "Progress over %d snapshots %.1fs apart: %d stuck, %d spinning, %d waiting, %d moving\n",
			s.Snapshots, s.IntervalS, s.Stuck, s.Spinning, s.Waiting, s.Moving)
	}
}

func threadRef(tid int, byTID map[int]*report.Thread, comm string) string {
	name := ""
	if t := byTID[tid]; t != nil {
		name = t.ShownName(comm)
	}
	return ownerText(tid, name)
}

// deadlockLine: DEADLOCK: thread 1235 "a" waits for mutex 0x… held by
// thread 1236 "b", which waits for mutex 0x… held by thread 1235 "a".
func deadlockLine(d report.Deadlock, byTID map[int]*report.Thread, comm string) string {
	var b strings.Builder
	b.WriteString("DEADLOCK: ")
	n := len(d.TIDs)
	for i, tid := range d.TIDs {
		kind, class := report.WaitMutex, ""
		if t := byTID[tid]; t != nil && t.WaitingFor != nil {
			kind, class = t.WaitingFor.Kind, t.WaitingFor.Class
		}
		sym := ""
		if t := byTID[tid]; t != nil && t.WaitingFor != nil {
			sym = t.WaitingFor.Symbol
		}
		if i == 0 {
			b.WriteString(threadRef(tid, byTID, comm))
			b.WriteString(" waits " + waitVerb(kind))
		} else {
			b.WriteString(", which waits " + waitVerb(kind))
		}
		if next := d.TIDs[(i+1)%n]; pythonLock(kind) {
			owner := report.WaitingFor{Kind: kind, Address: d.Addresses[i], Symbol: sym, Class: class, OwnerTID: &next}
			if t := byTID[next]; t != nil {
				owner.OwnerName = t.ShownName(comm)
			}
			b.WriteString(pythonWaitText(&owner, ""))
			continue
		}
		b.WriteString(lockText(kind, d.Addresses[i], sym))
		if class != "" {
			fmt.Fprintf(&b, " (a %s)", term.Escape(class))
		}
		b.WriteString(heldBy(kind) + threadRef(d.TIDs[(i+1)%n], byTID, comm))
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
		if w == nil || inCycle[p.Threads[i].TID] || idleWait(w) {
			continue
		}
		k := target{w.Kind, w.Address, -1}
		if w.OwnerTID != nil {
			k.owner = *w.OwnerTID
		}
		counts[k]++
		names[k] = append(names[k], p.Threads[i].ShownName(p.Comm))
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
		parts = append(parts, fmt.Sprintf("%d thread%s (%s) %s %s%s", n, plural(n),
			strings.Join(quoteAll(report.FoldNames(names[top])), ", "), verb, waitVerb(example[top].Kind), waitText(example[top])))
	}
	g := goroutineLockWaits(p)
	if g != "" {
		parts = append(parts, g)
	}
	if g := goroutineGroupWait(p, g != ""); g != "" {
		parts = append(parts, g)
	}
	if s := p.ProgressSummary; s != nil && stuckOnSomething(p)+s.Spinning > 0 {
		var ps []string
		if n := stuckOnSomething(p); n > 0 {
			ps = append(ps, fmt.Sprintf("%d thread%s stuck", n, plural(n)))
		}
		if s.Spinning > 0 {
			ps = append(ps, fmt.Sprintf("%d spinning", s.Spinning))
		}
		parts = append(parts, strings.Join(ps, ", ")+fmt.Sprintf(" over %d snapshots", s.Snapshots))
	}
	if len(parts) == 0 {
		return nothingWrong(p)
	}
	if len(p.Deadlocks) == 0 {
		parts = append([]string{"no deadlock found"}, parts...)
	}
	return strings.Join(parts, "; ")
}

// idleWait reports whether a wait is for an event rather than for
// something another thread holds: a condition variable, a semaphore; in
// Python, the lock of a Condition, Event, Semaphore, Barrier or queue
// (whose class the diagnosis gives: not a threading.Lock's, nor a
// Thread.join's), which its waiter made to be woken by a notify.
func idleWait(w *report.WaitingFor) bool {
	switch w.Kind {
	case report.WaitCondvar, report.WaitSemaphore:
		return true
	case report.WaitPythonLock:
		return w.Class != "" && w.Class != "threading.Lock" && w.Class != "threading.Thread"
	}
	return false
}

// stuckOnSomething counts the stuck threads that are not at rest: a
// thread stuck in an interruptible system call waiting for nothing that
// another thread holds (a condition variable, an event loop, a read) is
// idle, which is no finding; one stuck on a lock, in uninterruptible
// sleep (state D) or outside a system call is.
func stuckOnSomething(p *report.Process) int {
	n := 0
	for i := range p.Threads {
		t := &p.Threads[i]
		if t.Progress != report.ProgressStuck {
			continue
		}
		inCall := t.Syscall != nil && t.Syscall.InCall
		if !inCall || t.State == "D" || t.WaitingFor != nil && !idleWait(t.WaitingFor) {
			n++
		}
	}
	return n
}

// nothingWrong is the verdict of a process where nothing provably is
// wrong: no thread waits for a lock, no cycle, nothing spins or is stuck
// on something; then what most threads do alike, never one idle thread
// singled out.
func nothingWrong(p *report.Process) string {
	out := "nothing is wrong: no thread waits for a lock, no deadlock"
	if s := p.ProgressSummary; s != nil {
		out += fmt.Sprintf(", nothing spinning or stuck on a lock over %d snapshots", s.Snapshots)
	}
	groups := p.Groups
	if groups == nil {
		groups = report.GroupThreads(p.Threads, p.Comm)
	}
	// (GroupThreads' order: the largest first, equal ones by first TID)
	if len(groups) == 0 || len(groups[0].Members) == 0 || groups[0].Members[0] >= len(p.Threads) {
		return out
	}
	g := &groups[0]
	if g.Count == 1 && len(p.Threads) > 1 {
		return out + fmt.Sprintf("; no two of its %d threads are alike", len(p.Threads))
	}
	t := &p.Threads[g.Members[0]]
	out += fmt.Sprintf("; the largest group: %d thread%s (%s) ", g.Count, plural(g.Count), strings.Join(quoteAll(g.Names), ", "))
	switch {
	case t.WaitingFor != nil:
		out += "waiting for " + kindText(t.WaitingFor.Kind)
		if c := t.WaitingFor.Class; pythonLock(t.WaitingFor.Kind) && c != "" {
			out += " (" + term.Escape(c) + ")"
		}
	case t.Syscall != nil && t.Syscall.InCall:
		out += "blocked in " + t.Syscall.Name
	case t.State == "R":
		out += "running"
	default:
		out += "in state " + term.Escape(stateOrUnknown(t.State))
	}
	if fn := ownCode(p, t.Frames); fn != "" {
		out += " in " + term.Escape(fn)
	}
	return out
}

// ownCode is the innermost function of the program's own executable in
// frames, else the innermost named user function; "" none.
func ownCode(p *report.Process, frames []report.Frame) string {
	first := ""
	for i := range frames {
		f := &frames[i]
		if f.Kind != "user" || f.Function == "" {
			continue
		}
		if p.Exe != "" && f.Module == p.Exe {
			return f.Function
		}
		if first == "" {
			first = f.Function
		}
	}
	return first
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

// period says a duration roughly, in two significant figures: "100ms",
// "2.5ms", "1.5s", "40µs".
func period(ns int64) string {
	d := float64(ns)
	switch {
	case d >= 1e9:
		return fmt.Sprintf("%.1fs", d/1e9)
	case d >= 1e8:
		return fmt.Sprintf("%.0fms", math.Round(d/1e7)*10)
	case d >= 1e7:
		return fmt.Sprintf("%.0fms", d/1e6)
	case d >= 1e6:
		return fmt.Sprintf("%.1fms", d/1e6)
	}
	return fmt.Sprintf("%.0fµs", d/1e3)
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
