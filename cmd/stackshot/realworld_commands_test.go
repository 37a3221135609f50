//go:build linux

package main

// Real-world tests of the other commands on real programs: symbolize,
// record, capture and report, several PIDs, timeouts and bad input.

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// TestRealSymbolize compares symbolize with addr2line, for -e with a
// relative path (as addr2line takes it) and for -p on a live lld-linked
// PIE whose segments have file offset != vaddr.
func TestRealSymbolize(t *testing.T) {
	testutil.Need(t, "addr2line")
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-fomit-frame-pointer", "-pthread", "-no-pie")
	var readerC nmSym
	for _, s := range nmSymbols(t, bin) {
		if s.raw == "reader_c" {
			readerC = s
		}
	}
	if readerC.addr == 0 {
		t.Fatal("nm finds no reader_c")
	}
	addr := fmt.Sprintf("%#x", readerC.addr+4)
	want, err := exec.Command("addr2line", "-f", "-i", "-e", bin, addr).Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("exe-absolute", func(t *testing.T) {
		out, errOut, code := runSS(t, "symbolize", "-e", bin, addr)
		if code != 0 || out != string(want) {
			t.Errorf("exit %d: got %q, addr2line %q (%s)", code, out, want, errOut)
		}
	})
	t.Run("exe-relative", func(t *testing.T) {
		cmd := exec.Command(stackshotBin, "symbolize", "-e", filepath.Base(bin), addr)
		cmd.Dir = filepath.Dir(bin)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		if err != nil || so.String() != string(want) {
			t.Errorf("symbolize -e %s (relative, as addr2line accepts): %v: got %q, want %q; stderr %q",
				filepath.Base(bin), err, so.String(), want, se.String())
		}
	})
	t.Run("exe-symlink", func(t *testing.T) {
		// libfoo.so.2 -> libfoo.so.2.0.0: the name operators type.
		link := filepath.Join(t.TempDir(), "link-to-bin")
		if err := os.Symlink(bin, link); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runSS(t, "symbolize", "-e", link, addr)
		if code != 0 || out != string(want) {
			t.Errorf("symbolize -e through a symlink: exit %d: got %q, addr2line %q (%s)", code, out, want, errOut)
		}
	})
	t.Run("pid-lld", func(t *testing.T) {
		d := lldDir()
		if d == "" {
			testutil.Skip(t, "no ld.lld on this machine")
		}
		lbin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread", "-fuse-ld=lld", "-B"+d)
		var rc nmSym
		for _, s := range nmSymbols(t, lbin) {
			if s.raw == "reader_c" {
				rc = s
			}
		}
		tg := testutil.Start(t, lbin)
		// The load bias: where the first mapping (file offset 0, vaddr 0
		// for a PIE) of the binary starts.
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.PID))
		var start uint64
		for _, l := range strings.Split(string(maps), "\n") {
			if strings.HasSuffix(l, lbin) {
				fmt.Sscanf(l, "%x-", &start)
				break
			}
		}
		want, _ := exec.Command("addr2line", "-f", "-i", "-e", lbin, fmt.Sprintf("%#x", rc.addr+4)).Output()
		out, errOut, code := runSS(t, "symbolize", "-p", strconv.Itoa(tg.PID), fmt.Sprintf("%#x", start+rc.addr+4))
		if code != 0 || out != string(want) {
			t.Errorf("exit %d: got %q, addr2line %q (%s)", code, out, want, errOut)
		}
	})
}

// TestRealRecord records busy real programs (python3, a Go program) and
// checks every output format with independent readers: go tool pprof, an
// XML parser.
func TestRealRecord(t *testing.T) {
	type prog struct {
		name, hot string
		start     func(t *testing.T) *testutil.Target
	}
	for _, pr := range []prog{
		{"python3", "_PyEval_EvalFrameDefault", func(t *testing.T) *testutil.Target {
			testutil.Need(t, "python3")
			return testutil.Start(t, "python3", realSrc("pythreads.py"))
		}},
		{"go", "main.spinB", func(t *testing.T) *testutil.Target {
			return testutil.Start(t, buildGoTarget(t, "gotarget"), "spin")
		}},
	} {
		t.Run(pr.name, func(t *testing.T) {
			tg := pr.start(t)
			dir := t.TempDir()
			folded := filepath.Join(dir, "p.folded")
			if _, errOut, code := runSS(t, "record", "-q", "-F", "49", "-d", "1s", "-o", folded, strconv.Itoa(tg.PID)); code != 0 {
				t.Fatalf("record folded: exit %d: %s", code, errOut)
			}
			b, _ := os.ReadFile(folded)
			hot := 0
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				i := strings.LastIndexByte(l, ' ')
				if i < 0 {
					t.Errorf("bad folded line %q", l)
					continue
				}
				n, err := strconv.Atoi(l[i+1:])
				if err != nil || n <= 0 {
					t.Errorf("bad count in %q", l)
				}
				if strings.Contains(l[:i], ";"+pr.hot) {
					hot += n
				}
			}
			if hot == 0 {
				t.Errorf("no folded stack through %s:\n%s", pr.hot, b)
			}
			pb := filepath.Join(dir, "p.pb.gz")
			if _, errOut, code := runSS(t, "record", "-q", "-F", "49", "-d", "1s", "-o", pb, strconv.Itoa(tg.PID)); code != 0 {
				t.Fatalf("record pprof: exit %d: %s", code, errOut)
			}
			out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=200", pb).CombinedOutput()
			if err != nil || !strings.Contains(string(out), pr.hot) {
				t.Errorf("go tool pprof -top: %v, want %s listed:\n%s", err, pr.hot, out)
			}
			svg := filepath.Join(dir, "p.svg")
			if _, errOut, code := runSS(t, "record", "-q", "-F", "49", "-d", "1s", "-o", svg, strconv.Itoa(tg.PID)); code != 0 {
				t.Fatalf("record svg: exit %d: %s", code, errOut)
			}
			sb, _ := os.ReadFile(svg)
			d := xml.NewDecoder(bytes.NewReader(sb))
			for {
				if _, err := d.Token(); err != nil {
					if err != io.EOF {
						t.Errorf("svg is not well-formed XML: %v", err)
					}
					break
				}
			}
			if !bytes.Contains(sb, []byte(pr.hot)) {
				t.Errorf("svg lacks %s", pr.hot)
			}
			assertUntouched(t, tg.PID, false)
		})
	}
}

// TestRealCaptureReport: a capture of a real python3 process, reported
// later, gives the same stacks for the threads that did not move.
func TestRealCaptureReport(t *testing.T) {
	testutil.Need(t, "python3")
	tg := testutil.Start(t, "python3", realSrc("pythreads.py"))
	stopTarget(t, tg.PID)
	defer syscall.Kill(tg.PID, syscall.SIGCONT)
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	file := filepath.Join(t.TempDir(), "py.cap")
	if _, errOut, code := runSS(t, "capture", strconv.Itoa(tg.PID), "-o", file); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errOut)
	}
	out, errOut, code := runSS(t, "report", "--json", file)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	var q jProc
	if err := json.Unmarshal([]byte(out), &q); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	if len(q.Threads) != len(p.Threads) {
		t.Fatalf("report has %d threads, dump %d", len(q.Threads), len(p.Threads))
	}
	for i := range p.Threads {
		a, b := fnames(p.Threads[i]), fnames(q.Threads[i])
		if strings.Join(a, ";") != strings.Join(b, ";") {
			t.Errorf("thread %d: dump %v, report %v", p.Threads[i].TID, a, b)
		}
	}
}

// TestRealSeveralPIDsOneGone: with several PIDs, the JSON is an array
// (CLI.md), even when one of them could not be read (exit 1).
func TestRealSeveralPIDsOneGone(t *testing.T) {
	tg := startExec(t, "sleep 1000")
	c := exec.Command("true")
	c.Run()
	out, _, code := runSS(t, "--json", strconv.Itoa(tg.PID), strconv.Itoa(c.Process.Pid))
	if code != 1 {
		t.Errorf("exit %d, want 1 (one target could not be read)", code)
	}
	var ps []jProc
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Errorf("two PIDs given, want a JSON array (of the one readable process): %v\n%.200s", err, out)
	}
}

// TestRealSelfDumpNoFalsePermissionHint: as root, dumping stackshot's own
// process must not tell the user to become root.
func TestRealSelfDumpNoFalsePermissionHint(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "the check is about root")
	}
	cmd := exec.Command("/bin/sh", "-c", `exec "$0" "$$"`, stackshotBin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("self dump: %v: %s", err, se.String())
	}
	if strings.Contains(se.String(), "as root") {
		t.Errorf("running as root, stderr says: %q", se.String())
	}
	if !strings.Contains(so.String(), "Process ") {
		t.Errorf("no dump of itself: %q", so.String())
	}
}

// TestRealTimeoutKeepsEveryThread: when --timeout runs out before every
// thread is captured, the threads left are still listed from /proc (CLI.md:
// "threads that will not stop are reported from /proc"), never dropped
// from the output of a command that exits 0.
func TestRealTimeoutKeepsEveryThread(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "64")
	for _, args := range [][]string{
		{"--timeout", "1ms"},
		{"--mode", "stop", "--timeout", "2ms"},
	} {
		out, errOut, code := runSS(t, append(append([]string{"--json"}, args...), strconv.Itoa(tg.PID))...)
		var p jProc
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Errorf("%v: exit %d, bad JSON: %v (%s)", args, code, err, errOut)
			continue
		}
		if len(p.Threads) != 65 {
			t.Errorf("%v: exit %d, %d threads of 65 listed, warnings %v, stderr %q", args, code, len(p.Threads), p.Warnings, errOut)
		}
		for _, th := range p.Threads {
			if len(th.Frames) == 0 && th.Error == nil {
				t.Errorf("%v: thread %d has no frames and no error", args, th.TID)
			}
		}
	}
	assertUntouched(t, tg.PID, false)
}

// TestRealDeepStackNotStopped: a blocked thread whose stack is deeper than
// --max-frames is still read without a stop in the default mode; truncation
// at --max-frames is not something a stop could fix.
func TestRealDeepStackNotStopped(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{realSrc("deep.c")}, "-O0", "-g")
	tg := testutil.Start(t, bin, "20000")
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	th := p.Threads[0]
	if th.Capture != "nostop" || th.PauseUS != 0 {
		t.Errorf("thread blocked in read with a 20000-deep stack: capture %q, paused %.0f us; want nostop, 0", th.Capture, th.PauseUS)
	}
	f := fnames(th)
	if len(f) < 1000 || f[1] != "rec" {
		t.Errorf("want about --max-frames frames of rec, got %d: %.5v", len(f), f)
	}
	q := dumpJSON(t, "--max-frames", "30000", strconv.Itoa(tg.PID))
	if g := fnames(q.Threads[0]); len(g) < 20001 || g[len(g)-1] != "_start" {
		t.Errorf("--max-frames 30000: %d frames, last %q; want all 20001 rec frames down to _start", len(g), g[len(g)-1])
	}
	assertUntouched(t, tg.PID, false)
}

// TestRealTIDNotInProcess: -t with a thread id that is not in the process
// must say so, not print an empty process and exit 0.
func TestRealTIDNotInProcess(t *testing.T) {
	tg := startExec(t, "sleep 1000")
	c := exec.Command("true")
	c.Run()
	out, errOut, code := runSS(t, "-t", strconv.Itoa(c.Process.Pid), strconv.Itoa(tg.PID))
	if code == 0 && !strings.Contains(errOut, strconv.Itoa(c.Process.Pid)) {
		t.Errorf("-t %d (no such thread in %d): exit 0, no warning; output %q", c.Process.Pid, tg.PID, out)
	}
}

// TestRealFrameAddresses: a user frame's offset is pc minus the start of
// its function as nm gives it; a kernel frame's pc is its function's
// address in /proc/kallsyms plus its offset (CLI.md shows kernel pcs), when
// kallsyms shows addresses at all.
func TestRealFrameAddresses(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-fomit-frame-pointer", "-pthread", "-no-pie")
	addr := map[string]uint64{}
	for _, s := range nmSymbols(t, bin) {
		addr[s.raw] = s.addr
	}
	tg := testutil.Start(t, bin)
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	th := threadByName(t, p, "reader")
	checked := 0
	for _, f := range th.Frames {
		if f.Kind != "user" || f.Module != bin || f.Offset == nil {
			continue
		}
		a, ok := addr[f.Fn()]
		if !ok {
			continue
		}
		pc, _ := strconv.ParseUint(strings.TrimPrefix(f.PC, "0x"), 16, 64)
		if pc-a != *f.Offset {
			t.Errorf("%s: pc %#x offset %d; nm puts it at %#x, so the offset is %d", f.Fn(), pc, *f.Offset, a, pc-a)
		}
		checked++
	}
	if checked < 4 {
		t.Errorf("only %d frames checked", checked)
	}
	ks, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		testutil.Skip(t, "no /proc/kallsyms")
	}
	kaddr := map[string]uint64{}
	for _, l := range strings.Split(string(ks), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && len(f) < 4 {
			v, _ := strconv.ParseUint(f[0], 16, 64)
			kaddr[f[2]] = v
		}
	}
	if kaddr["_stext"] == 0 {
		testutil.Skip(t, "/proc/kallsyms hides addresses (kptr_restrict)")
	}
	for _, f := range th.Frames {
		if f.Kind != "kernel" || f.Offset == nil {
			continue
		}
		a, ok := kaddr[f.Fn()]
		if !ok {
			continue
		}
		want := fmt.Sprintf("%#x", a+*f.Offset)
		if f.PC != want {
			t.Errorf("kernel frame %s+%#x: pc %s, kallsyms gives %s", f.Fn(), *f.Offset, f.PC, want)
		}
	}
	assertUntouched(t, tg.PID, false)
}

// TestRealRecordBadOutputFailsFast: an -o whose directory does not exist is
// an error before sampling starts, not after a 30-second run (cron jobs).
func TestRealRecordBadOutputFailsFast(t *testing.T) {
	tg := startExec(t, "sleep 1000")
	start := time.Now()
	_, errOut, code := runSS(t, "record", "-q", "-d", "30s", "-o", filepath.Join(t.TempDir(), "missing", "p.folded"), strconv.Itoa(tg.PID))
	took := time.Since(start)
	if code != 1 {
		t.Errorf("exit %d, want 1: %s", code, errOut)
	}
	if took > 15*time.Second {
		t.Errorf("record with an unwritable -o ran %v of its 30 s before failing", took.Round(time.Second))
	}
}

// TestRealReportReplacedBinary: a capture is reported after its binary was
// replaced by a different build at the same path. The capture's build id
// no longer matches the file: frames there carry build_id_mismatch and no
// function (CLI.md), never the new file's names.
func TestRealReportReplacedBinary(t *testing.T) {
	src := buildBlocked(t, blockedVariants[1].flags)
	other := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O1", "-g", "-pthread")
	dir := t.TempDir()
	path := filepath.Join(dir, "victim")
	copyFile(t, src, path)
	tg := testutil.Start(t, path)
	file := filepath.Join(dir, "v.cap")
	if _, errOut, code := runSS(t, "capture", strconv.Itoa(tg.PID), "-o", file); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errOut)
	}
	os.Remove(path)
	copyFile(t, other, path)
	out, errOut, code := runSS(t, "report", "--json", file)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	var p jProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	n := 0
	for _, th := range p.Threads {
		for _, f := range th.Frames {
			if f.Module != path {
				continue
			}
			n++
			if !f.BuildIDMismatch || f.Function != nil {
				t.Errorf("thread %q: frame in the replaced binary: build_id_mismatch %v, function %q; want true and none", th.Name, f.BuildIDMismatch, f.Fn())
			}
		}
	}
	if n == 0 {
		t.Errorf("no frames in the replaced module")
	}
}
