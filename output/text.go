// Package output renders symbolized snapshots: pstack-like text, the JSON
// of the command-line contract (schema 1), and profile formats.
package output

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"stackshot/internal/term"
	"stackshot/report"
	"strconv"
	"strings"
	"unicode/utf8"
)

// TextOptions control text rendering.
type TextOptions struct {
	Source  bool // at file:line
	Inline  bool // inlined frames as their own lines
	Verbose bool // unwind method per frame, pauses, stop reasons
	// NoFold shows every thread on its own (--no-group): by default
	// threads that wait alike for nothing another thread holds, with the
	// same stack to the byte, are shown once (foldThreads).
	NoFold bool
}

// Text writes processes like gdb's "thread apply all bt".
func Text(w io.Writer, procs []*report.Process, o TextOptions) error {
	buf, direct := w.(*bytes.Buffer)
	if !direct {
		buf = new(bytes.Buffer)
	}
	if hint := textSizeHint(procs); buf.Available() < hint {
		buf.Grow(hint)
	}
	for i, p := range procs {
		if i > 0 {
			buf.WriteString("\n")
		}
		safeTextProcess(buf, p, o)
	}
	if direct {
		return nil
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func textProcess(w *bufio.Writer, p *report.Process, o TextOptions) {
	exe := p.Exe
	if exe == "" {
		exe = "?"
	}
	// Names, paths and notes come from the target: escaped (term).
	fmt.Fprintf(w, "Process %d (%s) %s%s: %s, state %s\n", p.PID, term.Escape(p.Comm), term.Escape(exe), startedAs(p),
		threadCount(p), term.Escape(stateOrUnknown(p.State)))
	if c := strings.TrimSpace(p.Cmdline); c != "" && c != p.Exe && c != p.Comm {
		fmt.Fprintf(w, "  command line: %s\n", term.Escape(cut(c, cmdlineShown)))
	}
	if s := signalName(p.FatalSignal); s != "" {
		fmt.Fprintf(w, "terminated with signal %s\n", s)
	}
	for _, wmsg := range p.Warnings {
		fmt.Fprintf(w, "  note: %s\n", term.Escape(wmsg))
	}
	textDiagnosis(w, p)
	if !textGroups(w, p, o) {
		for _, ts := range foldThreads(p, o) {
			textThreads(w, ts, o)
		}
	}
	textGoroutines(w, p, o)
}

// threadCount says how many threads the report shows, and of how many
// when it shows some (-t): "1 of 5 threads".
func threadCount(p *report.Process) string {
	n := len(p.Threads)
	if p.AllThreads > n {
		return fmt.Sprintf("%d of %d threads", n, p.AllThreads)
	}
	return fmt.Sprintf("%d thread%s", n, plural(n))
}

// cmdlineShown is how much of a command line the text shows.
const cmdlineShown = 256

// startedAs says the name a process was started as (its argv[0]) when
// its executable's name differs: a symlink the kernel resolved (Debian's
// redis-server is redis-check-rdb), a login shell's "-bash". A program
// that rewrites its arguments ("nginx: worker process") is named by their
// first word.
func startedAs(p *report.Process) string {
	argv0, _, _ := strings.Cut(strings.TrimSpace(p.Cmdline), " ")
	argv0 = filepath.Base(strings.TrimSuffix(argv0, ":"))
	if argv0 == "." || argv0 == "/" || p.Exe == "" || argv0 == filepath.Base(strings.TrimSuffix(p.Exe, " (deleted)")) {
		return ""
	}
	return ", started as " + term.Escape(argv0)
}

// cut shortens s to at most n bytes, on a character boundary, marking
// the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// stateOrUnknown is a state as the text shows it: "?" when none is known
// (a core's threads: the kernel's core notes carry none).
func stateOrUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func textThread(w *bufio.Writer, t *report.Thread, o TextOptions) {
	textThreads(w, []*report.Thread{t}, o)
}

// threadHeader writes the header of one thread, or of threads folded
// into one (ts[1:] alike to ts[0]: foldThreads).
func threadHeader(w *bufio.Writer, ts []*report.Thread, o TextOptions) {
	t := ts[0]
	if len(ts) == 1 {
		fmt.Fprintf(w, "\nThread %d %q (state %s", t.TID, t.Name, term.Escape(stateOrUnknown(t.State))) // %q escapes as term does
	} else {
		fmt.Fprintf(w, "\n%d threads with one stack: %s (state %s", len(ts), foldMembers(ts), term.Escape(stateOrUnknown(t.State)))
	}
	if t.JavaName != "" || t.JavaState != "" {
		fmt.Fprintf(w, ", java %q %s", t.JavaName, term.Escape(t.JavaState))
	}
	if t.PythonName != "" && len(ts) == 1 {
		fmt.Fprintf(w, ", python %q", t.PythonName) // (folded threads: each in foldMembers)
	}
	if t.Syscall != nil && t.Syscall.InCall {
		fmt.Fprintf(w, ", in %s", t.Syscall.Name)
	} else if t.Syscall != nil && t.Syscall.Running {
		fmt.Fprintf(w, ", running")
	}
	fmt.Fprintf(w, ", %s", captureWords(t.Capture))
	if o.Verbose && t.Capture == "ptrace" && len(ts) == 1 {
		fmt.Fprintf(w, " for %.1fus", float64(t.PauseNS)/1000)
	}
	gil := ""
	if t.HoldsGIL {
		gil = " [holds the GIL]"
	}
	fmt.Fprintf(w, ")%s:%s\n", gil, progressMark(t))
}

// textThreads writes one thread (ts[0]), or threads folded into one: the
// header names them all, the frames are ts[0]'s (theirs are the same).
func textThreads(w *bufio.Writer, ts []*report.Thread, o TextOptions) {
	t := ts[0]
	threadHeader(w, ts, o)
	n := 0
	boundary := false
	var prev *report.Frame // the frame body was made for
	var body []byte
	// The kernel's entry glue is said once, as the syscall line; -v and a
	// thread in D state (the kernel's own wait is the answer) show it.
	glueFrom, glueTo := glueRun(t)
	if o.Verbose || t.State == "D" {
		glueFrom = glueTo
	}
	for i := range t.Frames {
		f := &t.Frames[i]
		if f.Kind != "kernel" && !boundary {
			boundary = true
			if n > 0 || glueFrom < glueTo || (t.Syscall != nil && t.Syscall.InCall) {
				w.WriteString(callLines(ts))
			}
		}
		if (f.Inlined && !o.Inline) || (i >= glueFrom && i < glueTo) {
			continue
		}
		b := appendFrameNumber(w.AvailableBuffer(), n)
		if prev != nil && sameBody(f, prev) {
			b = append(b, body...) // (a recursion's line, escaped once)
		} else {
			start := len(b)
			b = appendFrameBody(b, f, o)
			body, prev = append(body[:0], b[start:]...), f
		}
		w.Write(b)
		n++
	}
	if !boundary && (n > 0 || glueFrom < glueTo) && t.Syscall != nil && t.Syscall.InCall {
		w.WriteString(callLines(ts))
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

// captureWords says how a thread was read (the JSON's capture value) in
// plain words.
func captureWords(c string) string {
	switch c {
	case "nostop":
		return "read without stopping"
	case "ptrace":
		return "stopped"
	case "proc-only":
		return "would not stop: from /proc"
	case "core":
		return "from a core"
	}
	return term.Escape(c)
}

func syscallLine(t *report.Thread) string {
	if t.Syscall == nil || !t.Syscall.InCall {
		return "    --- kernel / user boundary ---\n"
	}
	if l := fdSyscallLine(t); l != "" {
		return l
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

// appendFrameLine appends frame line n to b: what fmt would print, built
// by hand (a 1,000-frame dump prints 1,000 of them; fmt cost a tenth of
// its time).
func appendFrameLine(b []byte, n int, f *report.Frame, o TextOptions) []byte {
	return appendFrameBody(appendFrameNumber(b, n), f, o)
}

// appendFrameNumber appends a frame line's "#n" column (fmt's "#%-3d ").
func appendFrameNumber(b []byte, n int) []byte {
	b = append(b, '#')
	l := len(b)
	b = strconv.AppendInt(b, int64(n), 10)
	for len(b)-l < 3 { // %-3d
		b = append(b, ' ')
	}
	return append(b, ' ')
}

// sameBody reports whether frames a and b print the same line after its
// number: they differ at most in SP, which no line shows (a recursion's
// frames, one after another).
func sameBody(a, b *report.Frame) bool {
	c := *a
	c.SP = b.SP
	return c == *b
}

// appendFrameBody appends what a frame line shows after its number.
func appendFrameBody(b []byte, f *report.Frame, o TextOptions) []byte {
	if f.Kind == "kernel" {
		if f.PC != 0 {
			b = append(appendHex16(b, f.PC), " in "...)
		}
		if f.Function != "" {
			b = append(b, term.Escape(f.Function)...)
			if f.HasOffset {
				b = strconv.AppendUint(append(b, "+0x"...), f.Offset, 16)
			}
		} else {
			b = append(b, "??"...)
		}
		return append(b, " [kernel]\n"...)
	}
	if f.Kind == "python" {
		return appendPythonBody(b, f)
	}
	if f.Kind == "java" {
		return appendJavaFrame(b, f)
	}
	b = append(appendHex16(b, f.PC), " in "...)
	switch {
	case f.SignalFrame:
		b = append(b, "<signal handler called>"...)
	case f.Function != "":
		b = append(b, term.Escape(f.Function)...)
		if f.Inlined {
			b = append(b, " [inlined]"...)
		}
	default:
		b = append(b, "??"...)
	}
	if o.Source && f.File != "" {
		b = append(append(b, " at "...), term.Escape(f.File)...)
		if f.Line > 0 {
			b = strconv.AppendInt(append(b, ':'), int64(f.Line), 10)
		}
	}
	if f.HasModule {
		b = append(append(b, " ("...), term.Escape(filepath.Base(f.Module))...)
		b = append(strconv.AppendUint(append(b, "+0x"...), f.ModuleOffset, 16), ')')
	} else if f.Module != "" {
		b = append(append(append(b, " ("...), term.Escape(f.Module)...), ')')
	}
	if f.BuildIDMismatch {
		b = append(b, " [build id mismatch]"...)
	}
	if f.ModuleMissing {
		b = append(b, " [module not found]"...)
	}
	if o.Verbose {
		b = append(append(append(b, " ["...), f.Method...), ']')
	}
	return append(b, '\n')
}

// appendPythonBody appends a Python frame's line after its number:
// "Repo.fetch_rows at /srv/app/repo.py:88 [python]".
func appendPythonBody(b []byte, f *report.Frame) []byte {
	b = append(b, term.Escape(f.Function)...)
	if f.File != "" {
		b = append(append(b, " at "...), term.Escape(f.File)...)
		if f.Line > 0 {
			b = strconv.AppendInt(append(b, ':'), int64(f.Line), 10)
		}
	}
	return append(b, " [python]\n"...)
}

// appendHex16 appends v as fmt's 0x%016x does.
func appendHex16(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	b = append(b, "0x"...)
	var d [16]byte // (a uint64 has 16 hex digits at most)
	for i := 15; i >= 0; i-- {
		d[i] = digits[v&0xf]
		v >>= 4
	}
	return append(b, d[:]...)
}

// CaptureStats says, through say, how each capture went (for -v, on
// stderr: never inside the report): how long it took, how its threads
// were read, and their pauses.
func CaptureStats(procs []*report.Process, say func(string)) {
	for _, p := range procs {
		var pauses []int64
		var counts = map[string]int{}
		for _, t := range p.Threads {
			counts[t.Capture]++
			if t.Capture == "ptrace" {
				pauses = append(pauses, t.PauseNS)
			}
		}
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		how := make([]string, 0, len(keys))
		for _, k := range keys {
			how = append(how, fmt.Sprintf("%d %s", counts[k], captureWords(k)))
		}
		say(fmt.Sprintf("process %d: the capture of %d thread%s took %.2fms (%s)", p.PID, len(p.Threads),
			plural(len(p.Threads)), float64(p.WallNS)/1e6, strings.Join(how, ", ")))
		if len(pauses) > 0 {
			med, p99, max := PauseStats(pauses)
			say(fmt.Sprintf("process %d: each stopped thread's pause: median %.1fus, p99 %.1fus, max %.1fus", p.PID, med/1e3, p99/1e3, max/1e3))
		}
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

// appendJavaFrame appends a Java frame's line as jstack words it, with
// its frame type: "Pool.take(Pool.java:212) [java compiled]"; a native
// method (no frame type) "Thread.sleep(Native Method) [java native]".
func appendJavaFrame(b []byte, f *report.Frame) []byte {
	b = append(append(b, term.Escape(f.Function)...), '(')
	if f.FrameType == report.FrameNative {
		return append(b, "Native Method) [java native]\n"...)
	}
	switch {
	case f.File != "" && f.Line > 0:
		b = strconv.AppendInt(append(append(b, term.Escape(f.File)...), ':'), int64(f.Line), 10)
	case f.File != "":
		b = append(b, term.Escape(f.File)...)
	default:
		b = append(b, "Unknown Source"...)
	}
	return append(append(append(b, ") [java "...), f.FrameType.String()...), "]\n"...)
}
