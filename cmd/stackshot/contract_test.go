//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"stackshot/internal/testutil"
)

var commandNames = []string{"dump", "record", "capture", "report", "symbolize"}

// Help goes to stdout, exit 0, however it is asked for.
func TestHelpToStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out, errOut, code := runSS(t, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "stackshot record [flags] PID...") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want the overview on stdout", args, code, errOut, out)
		}
	}
	for _, cmd := range commandNames {
		var first string
		for _, args := range [][]string{{cmd, "--help"}, {cmd, "-h"}, {"help", cmd}} {
			out, errOut, code := runSS(t, args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: stackshot "+cmd+" ") {
				t.Errorf("%v: exit %d, stderr %q, stdout %.80q; want %s's help on stdout", args, code, errOut, out, cmd)
			}
			if first == "" {
				first = out
			} else if out != first {
				t.Errorf("%v: help differs from '%s --help'", args, cmd)
			}
		}
	}
}

// Each command's help lists the flags it takes and no others, and two
// examples of it.
func TestHelpPerCommand(t *testing.T) {
	flagRE := regexp.MustCompile(`(?m)^  (?:-\w, )?\s*--([\w-]+)`)
	want := map[string][]string{
		"dump": {"pid", "format", "json", "output", "tid", "kernel", "no-kernel", "source", "inline", "max-frames", "debug-dir", "no-demangle", "no-debuginfod", "no-cache", "mode", "consistent", "timeout", "stack-bytes", "verbose", "quiet", "max-debug-bytes", "group", "no-group", "interval", "count", "goroutines", "no-goroutines", "no-sandbox", "no-python", "no-java"},
		"record": {"pid", "format", "json", "output", "tid", "kernel", "no-kernel", "max-frames", "debug-dir", "no-demangle", "no-debuginfod", "no-cache", "mode", "consistent", "timeout", "stack-bytes", "freq", "duration", "per-thread", "idle", "sampler", "quiet", "verbose", "max-debug-bytes",
			"otlp", "otlp-header", "service", "spool", "spool-max-files", "spool-max-mb", "no-sandbox", "no-java", "no-python"},
		"capture":   {"pid", "format", "core-memory", "output", "tid", "kernel", "no-kernel", "mode", "consistent", "timeout", "stack-bytes", "quiet", "no-sandbox"},
		"report":    {"format", "json", "output", "tid", "kernel", "no-kernel", "source", "inline", "max-frames", "debug-dir", "no-demangle", "no-debuginfod", "no-cache", "verbose", "quiet", "max-debug-bytes", "perf-map", "sysroot", "no-sandbox", "no-java", "exe"},
		"symbolize": {"pid", "debug-dir", "no-demangle", "no-debuginfod", "no-cache", "exe", "addresses", "json", "max-debug-bytes", "no-sandbox"},
	}
	for _, cmd := range commandNames {
		out, _, _ := runSS(t, "help", cmd)
		var got []string
		for _, m := range flagRE.FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		if g, w := sortedJoin(got), sortedJoin(want[cmd]); g != w {
			t.Errorf("%s --help lists flags\n  %s\nwant\n  %s", cmd, g, w)
		}
		ex := out[strings.Index(out, "\nexamples:\n")+1:]
		if n := strings.Count(ex, "\n  stackshot "+cmd+" "); n != 2 {
			t.Errorf("%s --help has %d examples, want 2:\n%s", cmd, n, ex)
		}
		if (cmd == "report" || cmd == "symbolize") && strings.Contains(out, "PID...") {
			t.Errorf("%s --help says PID...:\n%s", cmd, out)
		}
	}
	// A flag every command took before, now not listed where it does
	// nothing, is still accepted there with a warning (the contract's
	// deprecation path); one never taken is refused.
	_, errOut, code := runSS(t, "report", "--mode", "stop", filepath.Join(t.TempDir(), "none.capture"))
	if code != 1 || !strings.HasPrefix(errOut, "stackshot: --mode has no effect on report (ignored; leave it out: a later release will refuse it)\n") {
		t.Errorf("report --mode: exit %d %q", code, errOut)
	}
	_, errOut, code = runSS(t, "report", "--freq", "9", "x.capture")
	if code != 2 || !strings.Contains(errOut, "unknown flag --freq (report does not take it;") {
		t.Errorf("report --freq: exit %d %q", code, errOut)
	}
}

func sortedJoin(s []string) string {
	c := append([]string{}, s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return strings.Join(c, " ")
}

func TestVersionFlag(t *testing.T) {
	a, _, ca := runSS(t, "version")
	b, _, cb := runSS(t, "--version")
	if ca != 0 || cb != 0 || a != b || !strings.HasPrefix(a, "stackshot ") {
		t.Errorf("version: %d %q; --version: %d %q", ca, a, cb, b)
	}
}

// contractLine is the contract's error form: one line,
// "stackshot: <what> (<why>; <what to do>)".
var contractLine = regexp.MustCompile(`^stackshot: [^\n]+ \([^\n]+; [^\n]+\)\n$`)

func TestMessagesInContractForm(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	pid := fmt.Sprint(tg.PID)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		has  string
	}{
		{nil, 2, "no process id given"},
		{[]string{"12ab"}, 2, `"12ab" is not a command or a process id`},
		{[]string{"dump", "--bogus", pid}, 2, "unknown flag --bogus"},
		{[]string{"dump", "-x", pid}, 2, "unknown flag -x"},
		{[]string{"dump", "-t", "abc", pid}, 2, `"abc" is not a thread id`},
		{[]string{"dump", "--timeout", "soon", pid}, 2, `--timeout "soon"`},
		{[]string{"symbolize", "-e", "/etc/passwd", "0x10"}, 1, "not an ELF file"},
		{[]string{"dump", "-o", dir, pid}, 2, "it is a directory"},
		{[]string{"record", "-d", "1m", "-o", dir, pid}, 2, "it is a directory"},
		{[]string{"dump", "--consistent", "--mode", "nostop", pid}, 2, "--consistent with --mode nostop"},
		{[]string{"help", "nope"}, 2, `no command "nope"`},
	} {
		out, errOut, code := runSS(t, tc.args...)
		if code != tc.code || out != "" {
			t.Errorf("%q: exit %d, stdout %q; want exit %d, nothing on stdout", tc.args, code, out, tc.code)
		}
		if !contractLine.MatchString(errOut) || !strings.Contains(errOut, tc.has) {
			t.Errorf("%q: stderr %q; want one line in the contract's form saying %q", tc.args, errOut, tc.has)
		}
		if strings.Contains(errOut, "strconv") || strings.Contains(errOut, "pflag") {
			t.Errorf("%q: leaks library words: %q", tc.args, errOut)
		}
	}
}

// --timeout bounds the whole command, the recording included.
func TestRecordTimeoutBoundsRecording(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	out := filepath.Join(t.TempDir(), "p.json")
	_, errOut, code := runSS(t, "record", "-d", "3s", "--timeout", "1s", "-o", out, fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var p struct {
		DurationNS int64 `json:"duration_ns"`
	}
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.DurationNS > 1e9 {
		t.Errorf("recorded %v with --timeout 1s", p.DurationNS)
	}
	if !strings.Contains(errOut, "stopped at the timeout") {
		t.Errorf("summary does not say the timeout ended it: %s", errOut)
	}
}

// On-CPU by default (pprof type cpu, only the running worker); --idle
// makes a wall-clock profile (type wall, the blocked main thread too).
func TestRecordPprofClock(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	for _, tc := range []struct {
		flags []string
		clock string
	}{{nil, "cpu"}, {[]string{"--idle"}, "wall"}} {
		out := filepath.Join(t.TempDir(), "p.pb.gz")
		args := append(append([]string{"record", "-q", "-d", "1s", "-o", out}, tc.flags...), fmt.Sprint(tg.PID))
		if _, errOut, code := runSS(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.flags, code, errOut)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(p.SampleType) != 2 || p.SampleType[1].Type != tc.clock || p.SampleType[1].Unit != "nanoseconds" ||
			p.PeriodType.Type != tc.clock || p.DefaultSampleType != tc.clock {
			t.Errorf("%v: sample types %v, period type %v; want samples/count and %s/nanoseconds", tc.flags, p.SampleType, p.PeriodType, tc.clock)
		}
		threads := map[string]bool{}
		for _, s := range p.Sample {
			for _, th := range s.Label["thread"] {
				threads[th] = true
			}
		}
		if offCPU := len(threads) > 1; !threads["worker"] || offCPU != (tc.clock == "wall") {
			t.Errorf("%v: threads sampled %v", tc.flags, threads)
		}
		top, err := exec.Command("go", "tool", "pprof", "-top", out).CombinedOutput()
		if err != nil || !strings.Contains(string(top), "Type: "+tc.clock) {
			t.Errorf("go tool pprof -top: %v\n%s", err, top)
		}
	}
}

// openPTY returns a pseudo-terminal's two ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		testutil.Skip(t, "no pseudo-terminals here: "+err.Error())
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// A binary profile is not written to a terminal; the refusal comes first.
func TestRecordPprofNotToTerminal(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	_, tty := openPTY(t)
	cmd := exec.Command(stackshotBin, "record", "--format", "pprof", "-d", "1m", fmt.Sprint(tg.PID))
	var se bytes.Buffer
	cmd.Stdout, cmd.Stderr = tty, &se
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2; stderr %q", err, se.String())
	}
	if !contractLine.MatchString(se.String()) || !strings.Contains(se.String(), "terminal") {
		t.Errorf("stderr %q", se.String())
	}
}

// report -t keeps only the threads asked for.
func TestReportThreadFilter(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	file := filepath.Join(t.TempDir(), "c.capture")
	if _, errOut, code := runSS(t, "capture", "-o", file, fmt.Sprint(tg.PID)); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errOut)
	}
	var worker int
	for tid, name := range threadNames(tg.PID) {
		if name == "worker" {
			worker = tid
		}
	}
	out, errOut, code := runSS(t, "report", "--json", "-t", fmt.Sprint(worker), file)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	var p jProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Threads) != 1 || p.Threads[0].TID != worker || p.Threads[0].Name != "worker" {
		t.Errorf("report -t %d gave threads %+v", worker, p.Threads)
	}
}

func threadNames(pid int) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
		out[tid] = strings.TrimSpace(string(b))
	}
	return out
}

// symbolize --json: an array of {address, frames: [{function, file,
// line, inlined}]}, checked against nm and addr2line.
func TestSymbolizeJSON(t *testing.T) {
	nm := testutil.Need(t, "nm")
	a2l := testutil.Need(t, "addr2line")
	bin := buildHot(t)
	syms, err := exec.Command(nm, bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	for _, l := range strings.Split(string(syms), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[2] == "hot_a" {
			v, _ := strconv.ParseUint(f[0], 16, 64)
			addr = fmt.Sprintf("%#x", v)
		}
	}
	if addr == "" {
		t.Fatal("nm lists no hot_a")
	}
	line, err := exec.Command(a2l, "-e", bin, addr).Output()
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runSS(t, "symbolize", "--json", "-e", bin, addr, "zz")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []struct {
		Address string  `json:"address"`
		Error   *string `json:"error"`
		Frames  []struct {
			Function *string `json:"function"`
			File     *string `json:"file"`
			Line     int     `json:"line"`
			Inlined  *bool   `json:"inlined"`
		} `json:"frames"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(got) != 2 || len(got[0].Frames) == 0 || got[1].Error == nil || len(got[1].Frames) != 0 {
		t.Fatalf("got %s", out)
	}
	f := got[0].Frames[len(got[0].Frames)-1]
	fileLine := fmt.Sprintf("%s:%d", deref(f.File), f.Line)
	if got[0].Address != addr || deref(f.Function) != "hot_a" || f.Inlined == nil || *f.Inlined ||
		filepath.Base(fileLine) != filepath.Base(strings.TrimSpace(string(line))) {
		t.Errorf("got %s; addr2line says %s", out, line)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
