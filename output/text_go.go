package output

import (
	"bufio"
	"fmt"
	"strings"

	"stackshot/report"
)

// maxGroupIDs bounds the goroutine ids listed in a group's header.
const maxGroupIDs = 16

// textGoroutines writes a Go process's goroutines after its threads, like
// the runtime's own traceback: a summary line, then each goroutine (or
// each group of identical ones) with its frames and creator.
func textGoroutines(w *bufio.Writer, p *report.Process, o TextOptions) {
	if p.Runtime == nil || p.Runtime.Name != "go" {
		return
	}
	ver := "program"
	if p.Runtime.Version != "" {
		ver = strings.TrimPrefix(p.Runtime.Version, "go")
	}
	if p.Goroutines == nil {
		fmt.Fprintf(w, "\nGo %s: goroutines not read\n", ver)
		return
	}
	onThreads, runnable := 0, 0
	for i := range p.Goroutines {
		switch g := &p.Goroutines[i]; {
		case g.OnThread():
			onThreads++
		case g.Runnable():
			runnable++
		}
	}
	n := len(p.Goroutines)
	fmt.Fprintf(w, "\nGo %s: %d goroutine%s (%d on threads, ", ver, n, plural(n), onThreads)
	if runnable > 0 {
		fmt.Fprintf(w, "%d runnable, ", runnable)
	}
	fmt.Fprintf(w, "%d waiting)", n-onThreads-runnable)
	if p.GoroutinesSkipped > 0 {
		fmt.Fprintf(w, "; %d skipped: they changed while read", p.GoroutinesSkipped)
	}
	w.WriteString("\n")
	// The runtime's tracebacks show file:line and inlined calls always.
	fo := o
	fo.Source, fo.Inline = true, true
	if p.GoroutineGroups != nil {
		for i := range p.GoroutineGroups {
			textGoroutineGroup(w, &p.GoroutineGroups[i], fo)
		}
		return
	}
	for i := range p.Goroutines {
		g := &p.Goroutines[i]
		fmt.Fprintf(w, "\ngoroutine %d [%s]", g.GoID, goroutineState(g))
		if g.TID != 0 {
			fmt.Fprintf(w, " on thread %d", g.TID)
		}
		w.WriteString(":\n")
		if g.Error == "" || len(g.Frames) > 0 {
			textGoFrames(w, g.Frames, fo)
		}
		if g.Error != "" {
			fmt.Fprintf(w, "    (%s)\n", g.Error)
		}
		textCreatedBy(w, g.CreatedBy)
	}
}

// goroutineState is the bracket of the runtime's goroutine header: the
// wait reason (else the status), and the wait when it is a minute or more.
func goroutineState(g *report.Goroutine) string {
	s := g.Status
	if g.WaitReason != "" {
		s = g.WaitReason
	}
	if g.HasWaiting {
		if m := g.WaitingNS / 60e9; m >= 1 {
			s += fmt.Sprintf(", %d minute%s", m, plural(int(m)))
		}
	}
	return s
}

func textGoFrames(w *bufio.Writer, frames []report.Frame, o TextOptions) {
	n := 0
	for i := range frames {
		f := &frames[i]
		if f.Kind != "user" {
			continue
		}
		w.Write(appendFrameLine(w.AvailableBuffer(), n, f, o))
		n++
	}
	if n == 0 {
		w.WriteString("    (no frames)\n")
	}
}

func textCreatedBy(w *bufio.Writer, c *report.CreatedBy) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "created by %s", c.Function)
	if c.HasGoID {
		fmt.Fprintf(w, " in goroutine %d", c.GoID)
	}
	if c.File != "" {
		fmt.Fprintf(w, " at %s:%d", c.File, c.Line)
	}
	w.WriteString("\n")
}

func textGoroutineGroup(w *bufio.Writer, grp *report.GoroutineGroup, o TextOptions) {
	n := len(grp.GoIDs)
	fmt.Fprintf(w, "\n%d goroutine%s", n, plural(n))
	if grp.Status != "" {
		fmt.Fprintf(w, " [%s]", grp.Status)
	}
	w.WriteString(": ")
	for i, id := range grp.GoIDs {
		if i == maxGroupIDs {
			fmt.Fprintf(w, ", ... (%d more)", n-i)
			break
		}
		if i > 0 {
			w.WriteString(", ")
		}
		fmt.Fprint(w, id)
	}
	w.WriteString("\n")
	textGoFrames(w, grp.Frames, o)
	textCreatedBy(w, grp.CreatedBy)
}
