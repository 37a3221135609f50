package output

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/term"
	"stackshot/report"
)

// fmtFrameLine is the frame line as fmt prints it (what appendFrameLine
// builds by hand).
func fmtFrameLine(n int, f *report.Frame, o TextOptions) string {
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
		b.WriteString(" [kernel]\n")
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

// Every kind of frame line, every option: the same bytes as fmt's.
func TestFrameLineAsFmt(t *testing.T) {
	frames := []report.Frame{
		{Kind: "kernel", PC: 0xffffffff81000130, Function: "entry_SYSCALL_64_after_hwframe", Offset: 0x76, HasOffset: true},
		{Kind: "kernel", Function: "futex_wait"},
		{Kind: "kernel"},
		{Kind: "user", PC: 0x7fe38f0982ec, Function: "read", Module: "/lib/x86_64-linux-gnu/libc.so.6", ModuleOffset: 0xf82ec, HasModule: true, Method: "cfi"},
		{Kind: "user", PC: 0, Function: "inl\x1b[31m", Inlined: true, File: "/src/a b.c", Line: 12, Module: "/tmp/x", ModuleOffset: 0, HasModule: true},
		{Kind: "user", PC: ^uint64(0), SignalFrame: true, Module: "[vdso]", BuildIDMismatch: true, ModuleMissing: true, Method: "fp"},
		{Kind: "user", PC: 0x1234, File: "f.go", Module: "memfd:jit (deleted)"},
		{Kind: "user", PC: 1 << 60, Function: "main", File: "m.c", Line: 0},
	}
	for _, o := range []TextOptions{{}, {Source: true}, {Verbose: true}, {Source: true, Verbose: true}} {
		for i := range frames {
			for _, n := range []int{0, 7, 42, 999, 1000, 12345} {
				want := fmtFrameLine(n, &frames[i], o)
				if got := string(appendFrameLine([]byte("x"), n, &frames[i], o)); got != "x"+want {
					t.Errorf("frame %d, #%d, %+v:\n got %q\nwant %q", i, n, o, got[1:], want)
				}
			}
		}
	}
}

// A thread's lines are each frame's own even where a line repeats the one
// before (a recursion's body is made once and copied): frames that differ
// only in SP print alike, any other field breaks the run.
func TestTextRepeatedFrames(t *testing.T) {
	rec := report.Frame{PC: 0x5555555551a9, SP: 0x7ffc0000, Kind: "user", Function: "rec\x1b", Offset: 0x30, HasOffset: true,
		Module: "/tmp/deep", ModuleOffset: 0x11a9, HasModule: true, Method: "cfi", File: "deep.c", Line: 16}
	var frames []report.Frame
	for i := range 12 {
		f := rec
		f.SP += uint64(32 * i)
		switch i {
		case 3:
			f.Line = 17
		case 4:
			f.Method = "fp"
		case 7:
			f.Function = "main"
		case 8:
			f.Inlined = true
		case 10:
			f.ModuleOffset++
		}
		frames = append(frames, f)
	}
	for _, o := range []TextOptions{{}, {Source: true, Inline: true, Verbose: true}} {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		textThread(w, &report.Thread{TID: 1, Name: "t", State: "S", Capture: "nostop", Frames: frames}, o)
		w.Flush()
		var want strings.Builder
		n := 0
		for i := range frames {
			if frames[i].Inlined && !o.Inline {
				continue
			}
			want.WriteString(fmtFrameLine(n, &frames[i], o))
			n++
		}
		// (after the blank line and the thread's header)
		_, got, _ := strings.Cut(strings.TrimPrefix(buf.String(), "\n"), "\n")
		if got != want.String() {
			t.Errorf("options %+v:\n%s\nwant\n%s", o, got, want.String())
		}
	}
}

// BenchmarkRenderDeep renders the text of one thread 1,000 frames deep (a
// recursion: the same function and module on every line), as a dump does
// (Render: the process's text, then the whole-report escape pass).
func BenchmarkRenderDeep(b *testing.B) {
	t := report.Thread{TID: 7, Name: "deep", State: "S", Capture: "nostop",
		Syscall: &report.Syscall{Name: "read", InCall: true}}
	for i := range 1000 {
		t.Frames = append(t.Frames, report.Frame{PC: 0x5555555551a9, SP: 0x7ffc0000 + uint64(32*i), Kind: "user",
			Function: "rec", Offset: 0x30, HasOffset: true, Module: "/tmp/deep", ModuleOffset: 0x11a9, HasModule: true, Method: "cfi"})
	}
	p := &report.Process{PID: 7, Comm: "deep", Exe: "/tmp/deep", State: "S", Threads: []report.Thread{t}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render([]*report.Process{p}, false, false, TextOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
