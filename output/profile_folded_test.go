package output

import (
	"bytes"
	"stackshot/report"
	"strconv"
	"strings"
	"testing"
)

func foldedString(t *testing.T, p *Profile) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteFolded(&buf, p); err != nil {
		t.Fatalf("WriteFolded: %v", err)
	}
	return buf.String()
}

func diffLines(t *testing.T, got string, want []string) {
	t.Helper()
	g := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if !strings.HasSuffix(got, "\n") {
		t.Errorf("output does not end with a newline")
	}
	n := max(len(g), len(want))
	for i := 0; i < n; i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(want) {
			b = want[i]
		}
		if a != b {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, a, b)
		}
	}
}

const (
	fxRootA = "myserver;__libc_start_call_main;main;"
	fxOpA   = "operator<<(std::ostream&, Foo const&);hot_a;hot_a_inner"
)

func TestFoldedLines(t *testing.T) {
	got := foldedString(t, fixtureProfile())
	// Written by hand from the fixture: roots are comms (';' in
	// "batch;job" replaced), frames root first, kernel frames suffixed,
	// inlined hot_a_inner its own frame, samples 2 and 3 merged (20+7),
	// the zero-count sample absent, lines in byte order.
	want := []string{
		"batch:job;[unknown]_[k];0xffffffff81000123_[k] 3",
		"batch:job;__libc_start_call_main;main;crunch 15",
		"batch:job;__libc_start_call_main;main;crunch;[unknown] 4",
		fxRootA + "__futex_abstimed_wait_common;do_futex_[k];futex_wait_queue_[k] 10",
		fxRootA + "hot_b 27",
		fxRootA + fxOpA + " 40",
		fxRootA + fxOpA + ";asm_exc_page_fault_[k];clear_page_erms_[k] 60",
		fxRootA + "weird:name with newline;libfoo.so.1+0x4a10;libfoo.so.1+0x4567 5",
	}
	diffLines(t, got, want)
}

func TestFoldedPerThread(t *testing.T) {
	p := fixtureProfile()
	p.PerThread = true
	got := foldedString(t, p)
	want := []string{
		"batch:job;batch:job;__libc_start_call_main;main;crunch 15",
		"batch:job;jit<&>;[unknown]_[k];0xffffffff81000123_[k] 3",
		"batch:job;jit<&>;__libc_start_call_main;main;crunch;[unknown] 4",
		"myserver;myserver;__libc_start_call_main;main;__futex_abstimed_wait_common;do_futex_[k];futex_wait_queue_[k] 10",
		"myserver;worker-1;__libc_start_call_main;main;" + fxOpA + ";asm_exc_page_fault_[k];clear_page_erms_[k] 60",
		"myserver;worker-1;__libc_start_call_main;main;weird:name with newline;libfoo.so.1+0x4a10;libfoo.so.1+0x4567 5",
		"myserver;worker-2;__libc_start_call_main;main;hot_b 27",
		"myserver;worker-2;__libc_start_call_main;main;" + fxOpA + " 40",
	}
	diffLines(t, got, want)
}

// Processes with one comm merge; a sample without frames keeps its root;
// an unnamed process and thread get "pid N" and "tid N".
func TestFoldedMergeAndRoots(t *testing.T) {
	f := report.Frame{PC: 0x401000, Kind: "user", Function: "spin", Module: "/bin/w", HasModule: true, ModuleOffset: 0x401000}
	p := &Profile{FreqHz: 99, Processes: []ProfileProcess{{PID: 1, Comm: "w"}, {PID: 2, Comm: "w"}},
		Samples: []Sample{
			{PID: 1, TID: 1, Thread: "w", Count: 3, Frames: []report.Frame{f}},
			{PID: 2, TID: 2, Thread: "w", Count: 4, Frames: []report.Frame{f}},
			{PID: 2, TID: 3, Thread: "w", Count: 2},
			{PID: 9, TID: 10, Count: 1, Frames: []report.Frame{f}},
		}}
	diffLines(t, foldedString(t, p), []string{"pid 9;spin 1", "w 2", "w;spin 7"})
	p.PerThread = true
	diffLines(t, foldedString(t, p), []string{"pid 9;tid 10;spin 1", "w;w 2", "w;w;spin 7"})
}

// Every line must split into a stack and a count that add up, whatever the
// names hold.
func TestFoldedHostileNames(t *testing.T) {
	names := []string{"a;b", "line\nbreak", "cr\rx", "tab\tx", "bad\xffutf8", "nul\x00x", "sp ace", "é;ü"}
	var frames []report.Frame
	for _, n := range names {
		frames = append(frames, report.Frame{PC: 0x1000, Kind: "user", Function: n})
	}
	p := &Profile{FreqHz: 99, Processes: []ProfileProcess{{PID: 1, Comm: "c;o\nmm"}},
		Samples: []Sample{{PID: 1, TID: 1, Thread: "t", Count: 5, Frames: frames}}}
	got := foldedString(t, p)
	// Root first: the names in reverse order, each cleaned by hand.
	want := "c:o mm;é:ü;sp ace;nul x;bad\uFFFDutf8;tab x;cr x;line break;a:b 5\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	line := strings.TrimSuffix(got, "\n")
	sp := strings.LastIndexByte(line, ' ')
	if n, err := strconv.Atoi(line[sp+1:]); err != nil || n != 5 {
		t.Errorf("count %q", line[sp+1:])
	}
	if c := strings.Count(line[:sp], ";"); c != len(names) {
		t.Errorf("%d separators, want %d", c, len(names))
	}
}

func TestFrameNames(t *testing.T) {
	for _, tc := range []struct {
		f    report.Frame
		want string
		kind frameKind
	}{
		{report.Frame{Kind: "kernel", Function: "schedule", PC: 0xffffffff81000000}, "schedule_[k]", kindKernel},
		{report.Frame{Kind: "kernel", PC: 0xffffffff81000010}, "0xffffffff81000010_[k]", kindKernel},
		{report.Frame{Kind: "kernel"}, "[unknown]_[k]", kindKernel},
		{report.Frame{Kind: "user", Function: "f", Inlined: true}, "f", kindInlined},
		{report.Frame{Kind: "user", Function: "__restore_rt", SignalFrame: true}, "<signal handler called>", kindUser},
		{report.Frame{Kind: "user", Module: "/lib/libz.so.1", HasModule: true, ModuleOffset: 0x2a0}, "libz.so.1+0x2a0", kindUnknown},
		{report.Frame{Kind: "user", Module: "[vdso]"}, "[vdso]", kindUnknown},
		{report.Frame{Kind: "user", Module: "/lib/x.so", HasModule: true, ModuleOffset: 0x10, BuildIDMismatch: true}, "x.so+0x10", kindUnknown},
		{report.Frame{Kind: "user", PC: 0x7f0000001000}, "[unknown]", kindUnknown},
	} {
		got, kind := frameName(&tc.f)
		if got != tc.want || kind != tc.kind {
			t.Errorf("%+v: got %q/%d, want %q/%d", tc.f, got, kind, tc.want, tc.kind)
		}
	}
}

func TestFormatFor(t *testing.T) {
	for _, tc := range []struct{ path, format, want string }{
		{"out.pb.gz", "", "pprof"},
		{"/var/tmp/prof-%p-%t.pb.gz", "", "pprof"},
		{"OUT.PB.GZ", "", "pprof"},
		{"x.pprof", "", "pprof"},
		{"x.pb", "", "pprof"},
		{"x.folded", "", "folded"},
		{"x.collapsed", "", "folded"},
		{"x.stacks", "", "folded"},
		{"x.svg", "", "svg"},
		{"x.json", "", "json"},
		{"x.txt", "", "text"},
		{"x.text", "", "text"},
		{"x.gz", "", "folded"},
		{"x.dat", "", "folded"},
		{"dir.svg/x", "", "folded"},
		{".json", "", "folded"},
		{"", "", "folded"},
		{"-", "", "folded"},
		{"out.pb.gz", "svg", "svg"},
		{"", "JSON", "json"},
	} {
		got, err := FormatFor(tc.path, tc.format)
		if err != nil || got != tc.want {
			t.Errorf("FormatFor(%q, %q) = %q, %v; want %q", tc.path, tc.format, got, err, tc.want)
		}
	}
	if _, err := FormatFor("x.svg", "png"); err == nil {
		t.Errorf("unknown format accepted")
	}
	// ".pb.gz" must win however the extension table is walked: add a
	// shorter ".gz" for another format and check again.
	ProfileFormats["json"] = append(ProfileFormats["json"], ".gz")
	defer func() { ProfileFormats["json"] = ProfileFormats["json"][:len(ProfileFormats["json"])-1] }()
	for i := 0; i < 20; i++ {
		if got, _ := FormatFor("a.pb.gz", ""); got != "pprof" {
			t.Fatalf("a.pb.gz chose %q with .gz present", got)
		}
	}
	if got, _ := FormatFor("a.gz", ""); got != "json" {
		t.Errorf("a.gz chose %q", got)
	}
	var buf bytes.Buffer
	if err := WriteProfile(&buf, fixtureProfile(), "bogus", 10); err == nil {
		t.Errorf("WriteProfile accepted an unknown format")
	}
}
