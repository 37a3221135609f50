// Package output renders symbolized snapshots: pstack-like text, the JSON
// of the command-line contract (schema 1), and profile formats.
package output

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"stackshot/internal/term"
	"stackshot/report"
	"strings"
)

// TextOptions control text rendering.
type TextOptions struct {
	Source  bool // at file:line
	Inline  bool // inlined frames as their own lines
	Verbose bool // unwind method per frame, pauses, stop reasons
}

// Text writes processes like gdb's "thread apply all bt".
func Text(w io.Writer, procs []*report.Process, o TextOptions) error {
	bw := bufio.NewWriter(w)
	for i, p := range procs {
		if i > 0 {
			bw.WriteString("\n")
		}
		safeTextProcess(bw, p, o)
	}
	return bw.Flush()
}

func textProcess(w *bufio.Writer, p *report.Process, o TextOptions) {
	exe := p.Exe
	if exe == "" {
		exe = "?"
	}
	// Names, paths and notes come from the target: escaped (term).
	fmt.Fprintf(w, "Process %d (%s) %s: %d thread%s, state %s\n", p.PID, term.Escape(p.Comm), term.Escape(exe), len(p.Threads), plural(len(p.Threads)), term.Escape(p.State))
	for _, wmsg := range p.Warnings {
		fmt.Fprintf(w, "  note: %s\n", term.Escape(wmsg))
	}
	textDiagnosis(w, p)
	for i := range p.Threads {
		if textGroups(w, p, o) {
			break
		}
		textThread(w, &p.Threads[i], o)
	}
	textGoroutines(w, p, o)
	if o.Verbose {
		textPauses(w, p)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func textThread(w *bufio.Writer, t *report.Thread, o TextOptions) {
	fmt.Fprintf(w, "\nThread %d %q (state %s", t.TID, t.Name, term.Escape(t.State)) // %q escapes as term does
	if t.Syscall != nil && t.Syscall.InCall {
		fmt.Fprintf(w, ", in %s", t.Syscall.Name)
	} else if t.Syscall != nil && t.Syscall.Running {
		fmt.Fprintf(w, ", running")
	}
	fmt.Fprintf(w, ", %s", t.Capture)
	if o.Verbose && t.Capture == "ptrace" {
		fmt.Fprintf(w, ", paused %.1fus", float64(t.PauseNS)/1000)
	}
	fmt.Fprintf(w, "):%s\n", progressMark(t))
	n := 0
	boundary := false
	for i := range t.Frames {
		f := &t.Frames[i]
		if f.Kind == "user" && !boundary {
			boundary = true
			if n > 0 || (t.Syscall != nil && t.Syscall.InCall) {
				w.WriteString(syscallLine(t))
				w.WriteString(waitLine(t))
			}
		}
		if f.Inlined && !o.Inline {
			continue
		}
		w.WriteString(frameLine(n, f, o))
		n++
	}
	if !boundary && n > 0 && t.Syscall != nil && t.Syscall.InCall {
		w.WriteString(syscallLine(t))
		w.WriteString(waitLine(t))
	}
	if t.Error != "" {
		fmt.Fprintf(w, "    (%s)\n", term.Escape(t.Error))
	} else if o.Verbose && t.Stop != "" {
		fmt.Fprintf(w, "    (unwind ended: %s)\n", t.Stop)
	}
	if len(t.Frames) == 0 && t.Error == "" {
		fmt.Fprintf(w, "    (no frames)\n")
	}
}

func syscallLine(t *report.Thread) string {
	if t.Syscall == nil || !t.Syscall.InCall {
		return "    --- kernel / user boundary ---\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "    --- %s(", t.Syscall.Name)
	for i, a := range t.Syscall.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%#x", a)
	}
	b.WriteString(") ---\n")
	return b.String()
}

func frameLine(n int, f *report.Frame, o TextOptions) string {
	var b strings.Builder
	if f.Kind == "kernel" {
		fmt.Fprintf(&b, "#%-3d ", n)
		if f.PC != 0 {
			fmt.Fprintf(&b, "0x%016x in ", f.PC)
		}
		if f.Function != "" {
			b.WriteString(term.Escape(f.Function))
			if f.HasOffset {
				fmt.Fprintf(&b, "+0x%x", f.Offset)
			}
		} else {
			b.WriteString("??")
		}
		b.WriteString(" [kernel]")
		b.WriteString("\n")
		return b.String()
	}
	fmt.Fprintf(&b, "#%-3d 0x%016x in ", n, f.PC)
	switch {
	case f.SignalFrame:
		b.WriteString("<signal handler called>")
	case f.Function != "":
		b.WriteString(term.Escape(f.Function))
		if f.Inlined {
			b.WriteString(" [inlined]")
		}
	default:
		b.WriteString("??")
	}
	if o.Source && f.File != "" {
		fmt.Fprintf(&b, " at %s", term.Escape(f.File))
		if f.Line > 0 {
			fmt.Fprintf(&b, ":%d", f.Line)
		}
	}
	if f.HasModule {
		fmt.Fprintf(&b, " (%s+0x%x)", term.Escape(filepath.Base(f.Module)), f.ModuleOffset)
	} else if f.Module != "" {
		fmt.Fprintf(&b, " (%s)", term.Escape(f.Module))
	}
	if f.BuildIDMismatch {
		b.WriteString(" [build id mismatch]")
	}
	if f.ModuleMissing {
		b.WriteString(" [module not found]")
	}
	if o.Verbose {
		fmt.Fprintf(&b, " [%s]", f.Method)
	}
	b.WriteString("\n")
	return b.String()
}

func textPauses(w *bufio.Writer, p *report.Process) {
	var pauses []int64
	var counts = map[string]int{}
	for _, t := range p.Threads {
		counts[t.Capture]++
		if t.Capture == "ptrace" {
			pauses = append(pauses, t.PauseNS)
		}
	}
	fmt.Fprintf(w, "\nCapture of %d threads took %.2fms:", len(p.Threads), float64(p.WallNS)/1e6)
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, " %d %s", counts[k], k)
	}
	w.WriteString("\n")
	if len(pauses) > 0 {
		med, p99, max := PauseStats(pauses)
		fmt.Fprintf(w, "Per-thread pause: median %.1fus, p99 %.1fus, max %.1fus\n", med/1e3, p99/1e3, max/1e3)
	}
}

// PauseStats returns the median, 99th percentile and maximum of ns values.
func PauseStats(ns []int64) (med, p99, max float64) {
	if len(ns) == 0 {
		return 0, 0, 0
	}
	s := append([]int64(nil), ns...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	med = float64(s[len(s)/2])
	idx := (len(s)*99 + 99) / 100
	if idx >= len(s) {
		idx = len(s) - 1
	}
	p99 = float64(s[idx])
	max = float64(s[len(s)-1])
	return
}
