package output

import (
	"fmt"
	"strings"

	"stackshot/internal/term"
	"stackshot/report"
)

// foldShown is how many folded threads a header names one by one; past
// it, their names fold (worker-*) and their TIDs into ranges.
const foldShown = 8

// foldThreads orders p's threads for the text, each in exactly one list:
// a thread alone, or threads shown once because nothing would tell them
// apart but their TIDs, names and the address each waits on. Threads fold
// when they wait alike for nothing another thread holds (a condition
// variable, a semaphore, a descriptor, no wait at all) and their headers,
// system calls and frames would print the same to the byte: the pool of
// idle workers, not the answer. A thread that waits for what another
// holds, one in D state, the GIL's holder, a Java thread, one that failed
// is always shown on its own; so is every thread with -v or --no-group.
// Lists come in the order of their first thread.
func foldThreads(p *report.Process, o TextOptions) [][]*report.Thread {
	out := make([][]*report.Thread, 0, len(p.Threads))
	// (A thread whose rough shape no other shares is not rendered for a
	// key: a deep stack would be rendered twice.)
	shapes := map[foldShape]int{}
	if !o.NoFold && !o.Verbose {
		for i := range p.Threads {
			if foldable(&p.Threads[i]) {
				shapes[shapeOf(&p.Threads[i])]++
			}
		}
	}
	at := map[string]int{} // fold key -> index in out
	for i := range p.Threads {
		t := &p.Threads[i]
		if o.NoFold || o.Verbose || !foldable(t) || shapes[shapeOf(t)] < 2 {
			out = append(out, []*report.Thread{t})
			continue
		}
		k := foldKey(t, o)
		if j, ok := at[k]; ok {
			out[j] = append(out[j], t)
			continue
		}
		at[k] = len(out)
		out = append(out, []*report.Thread{t})
	}
	return out
}

// foldShape is what threads that fold have in common, cheaply told.
type foldShape struct {
	state            string
	frames           int
	inner, outer     uint64
	innerFn, outerFn string
}

func shapeOf(t *report.Thread) foldShape {
	in, out := &t.Frames[0], &t.Frames[len(t.Frames)-1]
	return foldShape{t.State, len(t.Frames), in.PC, out.PC, in.Function, out.Function}
}

// foldable reports whether t may be shown folded with threads alike.
func foldable(t *report.Thread) bool {
	if t.Error != "" || len(t.Frames) == 0 || t.State == "D" || t.HoldsGIL || t.JavaName != "" || t.JavaState != "" {
		return false
	}
	w := t.WaitingFor
	return w == nil || idleWait(w) && w.OwnerTID == nil && w.OwnerPID == 0
}

// foldKey is what must be equal for threads to fold: everything the text
// shows of them but their TIDs, names, system call arguments and the
// address waited on.
func foldKey(t *report.Thread, o TextOptions) string {
	b := []byte(t.State)
	b = append(b, 0)
	b = append(b, t.Capture...)
	b = append(b, 0)
	b = append(b, progressMark(t)...)
	if s := t.Syscall; s != nil {
		b = fmt.Appendf(b, "\x00%s %t %t %d", s.Name, s.InCall, s.Running, len(s.Args))
	}
	b = append(b, 0)
	b = append(b, fdSyscallLine(t)...)
	if w := t.WaitingFor; w != nil {
		b = append(b, w.Kind...)
		b = append(b, 0)
		b = append(b, w.Symbol...)
		if !ownerless(w) {
			b = append(b, waitLine(t)...) // (only its own line tells it)
		}
	}
	for i := range t.Frames {
		b = append(b, '\n')
		b = appendFrameBody(b, &t.Frames[i], o)
	}
	return string(b)
}

// foldMembers names folded threads: `22473 "bio_close_file", 22474
// "bio_aof_fsync"`, or past foldShown `"worker-*": threads 100-163`.
// Python threads' threading names are each said, never folded:
// `8535 "python3" python "worker-1", ...`, or past foldShown
// `"python3": threads 8535-8598, python "worker-1", "worker-2", ...`.
func foldMembers(ts []*report.Thread) string {
	if len(ts) > foldShown {
		names := make([]string, len(ts))
		tids := make([]int, len(ts))
		var py []string
		seen := map[string]bool{}
		for i, t := range ts {
			names[i], tids[i] = t.Name, t.TID
			if t.PythonName != "" && !seen[t.PythonName] {
				seen[t.PythonName] = true
				py = append(py, t.PythonName)
			}
		}
		s := strings.Join(quoteAll(report.FoldNames(names)), ", ") + ": " + tidRanges(tids)
		if len(py) > 0 {
			s += ", python " + strings.Join(quoteAll(py), ", ")
		}
		return s
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%d %q", t.TID, t.Name) // %q escapes as term does
		if t.PythonName != "" {
			parts[i] += fmt.Sprintf(" python %q", t.PythonName)
		}
	}
	return strings.Join(parts, ", ")
}

// callLines is the system call line of one thread or of threads folded
// into one, and what they wait for. A wait for nothing anyone holds (a
// condition variable, a semaphore: they have no owner) is said on the
// call's own line, since it only names what the call's address is:
// `--- futex(0x…, …): waiting for condition variable 0x… ---`; a wait for
// what another thread holds gets a line of its own under the call.
func callLines(ts []*report.Thread) string {
	t := ts[0]
	if t.Syscall == nil || !t.Syscall.InCall {
		return syscallLine(t) + waitLine(t)
	}
	l := fdSyscallLine(t) // (equal in a fold: part of its key)
	if w := t.WaitingFor; w != nil && ownerless(w) {
		if l == "" {
			l = "    --- " + t.Syscall.Name + "(" + foldArgs(ts, 1) + ")"
		} else {
			l = strings.TrimSuffix(l, " ---\n")
		}
		return l + ": waiting " + waitVerb(w.Kind) + idleWaits(ts) + " ---\n"
	}
	if l == "" {
		l = "    --- " + t.Syscall.Name + "(" + foldArgs(ts, len(t.Syscall.Args)) + ") ---\n"
	}
	return l + waitLine(t)
}

// ownerless reports whether w is a native wait for what has no owner by
// nature (a condition variable, a semaphore), said on the call's line. (A
// Python thread at rest in a queue or a Condition has its own line: it
// says the class and the Python line that asked.)
func ownerless(w *report.WaitingFor) bool {
	return (w.Kind == report.WaitCondvar || w.Kind == report.WaitSemaphore) && w.OwnerTID == nil && w.OwnerPID == 0
}

// foldArgs writes the first n arguments of the threads' system call (an
// argument that differs between them as "…"), then "…" for the rest;
// runs of "…" are one.
func foldArgs(ts []*report.Thread, n int) string {
	args := ts[0].Syscall.Args
	var parts []string
	for i, a := range args {
		s := "…"
		if i < n {
			s = fmt.Sprintf("%#x", a)
			for _, o := range ts[1:] {
				if o.Syscall == nil || i >= len(o.Syscall.Args) || o.Syscall.Args[i] != a {
					s = "…"
				}
			}
		}
		if s == "…" && len(parts) > 0 && parts[len(parts)-1] == s {
			continue
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// idleWaits names what folded threads wait for, each its own when they
// differ: `condition variable 0x…`, `condition variables 0x…a0, 0x…c8`
// (in the order of the header's threads).
func idleWaits(ts []*report.Thread) string {
	w := ts[0].WaitingFor
	addrs := []uint64{w.Address}
	for _, o := range ts[1:] {
		if o.WaitingFor.Address != w.Address {
			addrs = nil
			break
		}
	}
	if addrs != nil {
		return lockText(w.Kind, w.Address, w.Symbol)
	}
	parts := make([]string, len(ts))
	for i, o := range ts {
		parts[i] = fmt.Sprintf("%#x", o.WaitingFor.Address)
	}
	what := kindText(w.Kind) + "s "
	if w.Symbol != "" {
		what += term.Escape(w.Symbol) + " "
	}
	return what + strings.Join(parts, ", ")
}
