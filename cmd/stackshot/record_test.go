//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"stackshot/internal/testutil"
)

func buildHot(t testing.TB) string {
	return testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "hot.c")}, "-O2", "-g", "-pthread")
}

// foldedShares sums the counts of folded stacks that contain each function.
func foldedShares(t *testing.T, data string, fns ...string) (map[string]int64, int64) {
	t.Helper()
	got := map[string]int64{}
	var total int64
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad folded line %q", line)
		}
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("bad count in %q", line)
		}
		frames := strings.Split(line[:i], ";")
		for _, fn := range fns {
			for _, f := range frames {
				if f == fn {
					got[fn] += n
					break
				}
			}
		}
		total += n
	}
	return got, total
}

func checkShare(t *testing.T, what string, a, b int64) {
	t.Helper()
	if a+b < 100 {
		t.Fatalf("%s: only %d samples in hot_a+hot_b", what, a+b)
	}
	share := float64(a) / float64(a+b)
	if share < 0.65 || share > 0.85 {
		t.Errorf("%s: hot_a has %.0f%% of hot_a+hot_b samples (%d/%d), want 75%% ± 10", what, share*100, a, a+b)
	}
	t.Logf("%s: hot_a %d, hot_b %d: %.1f%%", what, a, b, share*100)
}

func TestRecordFoldedShares(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	out := filepath.Join(t.TempDir(), "p.folded")
	// Long enough for 2 s of the worker's CPU on a loaded machine too.
	d := testutil.WallFor(tg.PID, 2*time.Second, 3*time.Second, 15*time.Second)
	cpu0 := testutil.ProcessCPU(tg.PID)
	_, errOut, code := runSS(t, "record", "-v", "-F", "199", "-d", d.String(), "-o", out, fmt.Sprint(tg.PID))
	cpu := testutil.ProcessCPU(tg.PID) - cpu0
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, total := foldedShares(t, string(b), "hot_a", "hot_b")
	checkShare(t, "folded", got["hot_a"], got["hot_b"])
	// On-CPU samples only: the worker, about one sample per 1/199 s of
	// its CPU time (the main thread sits in read and is left out, as the
	// summary says).
	if want := cpu.Seconds() * 199; float64(total) < 0.6*want {
		t.Errorf("only %d samples in %v at 199 Hz of a thread that ran %v (%.0f expected)", total, d, cpu, want)
	}
	for _, want := range []string{"ticks", "Hz", "on-CPU samples", "left out (--idle keeps them)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("summary lacks %q: %s", want, errOut)
		}
	}
	// Every folded line's root is the process name.
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(l, "hot;") {
			t.Errorf("folded line does not start at the process: %q", l)
			break
		}
	}
}

func TestRecordPprof(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	out := filepath.Join(t.TempDir(), "p.pb.gz")
	_, errOut, code := runSS(t, "record", "-v", "-F", "199", "-d", "3s", "-o", out, fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("not a pprof profile: %v", err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatalf("invalid profile: %v", err)
	}
	var a, b int64
	threads := map[string]bool{}
	for _, s := range p.Sample {
		has := map[string]bool{}
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				has[ln.Function.Name] = true
			}
		}
		if has["hot_a"] {
			a += s.Value[0]
		}
		if has["hot_b"] {
			b += s.Value[0]
		}
		for _, th := range s.Label["thread"] {
			threads[th] = true
		}
	}
	checkShare(t, "pprof", a, b)
	if !threads["worker"] {
		t.Errorf("no sample labelled thread=worker: %v", threads)
	}
	buildIDs := 0
	for _, m := range p.Mapping {
		if m.BuildID != "" {
			buildIDs++
		}
	}
	if buildIDs == 0 {
		t.Errorf("no mapping carries a build id")
	}
	// go tool pprof opens it and lists the functions.
	top, err := exec.Command("go", "tool", "pprof", "-top", out).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, top)
	}
	for _, fn := range []string{"hot_a", "hot_b"} {
		if !strings.Contains(string(top), fn) {
			t.Errorf("go tool pprof -top does not list %s:\n%s", fn, top)
		}
	}
}

func TestRecordFormatsByExtension(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	dir := t.TempDir()
	for _, ext := range []string{".svg", ".json", ".txt", ".folded"} {
		out := filepath.Join(dir, "p"+ext)
		_, errOut, code := runSS(t, "record", "-q", "-F", "99", "-d", "1s", "-o", out, fmt.Sprint(tg.PID))
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", ext, code, errOut)
		}
		if errOut != "" {
			t.Errorf("%s: -q still wrote to stderr: %q", ext, errOut)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		switch ext {
		case ".svg":
			dec := xml.NewDecoder(bytes.NewReader(b))
			for {
				if _, err := dec.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("svg is not XML: %v", err)
				}
			}
			for _, fn := range []string{"hot_a", "hot_b", "worker"} {
				if !bytes.Contains(b, []byte(fn)) {
					t.Errorf("svg lacks frame %q", fn)
				}
			}
		case ".json":
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("json: %v", err)
			}
			if v["schema"] == nil {
				t.Errorf("json profile without schema: %.200s", b)
			}
		case ".txt":
			if !bytes.Contains(b, []byte("hot_a")) {
				t.Errorf("text profile lacks hot_a:\n%s", b)
			}
		case ".folded":
			if !bytes.Contains(b, []byte(";hot_a;")) {
				t.Errorf("folded lacks hot_a:\n%s", b)
			}
		}
	}
}

func TestRecordOutputPlaceholders(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	dir := t.TempDir()
	_, errOut, code := runSS(t, "record", "-q", "-d", "300ms", "-o", filepath.Join(dir, "prof-%p-%h-%t.folded"), fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("want one file, got %v", ents)
	}
	host, _ := os.Hostname()
	name := ents[0].Name()
	if !strings.HasPrefix(name, fmt.Sprintf("prof-%d-%s-", tg.PID, host)) || !strings.HasSuffix(name, "Z.folded") {
		t.Errorf("placeholders not expanded: %s", name)
	}
}

func TestRecordTargetExits(t *testing.T) {
	tg := testutil.Start(t, buildHot(t), "3000")
	out := filepath.Join(t.TempDir(), "p.folded")
	start := time.Now()
	_, errOut, code := runSS(t, "record", "-d", "20s", "-o", out, fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("record went on for %v after the target exited", time.Since(start))
	}
	if !strings.Contains(errOut, "exited") {
		t.Errorf("no note that the target exited: %s", errOut)
	}
	b, _ := os.ReadFile(out)
	got, _ := foldedShares(t, string(b), "hot_a")
	if got["hot_a"] == 0 {
		t.Errorf("profile of the run before the exit is empty:\n%s", b)
	}
}

func TestRecordInterruptWritesProfile(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	out := filepath.Join(t.TempDir(), "p.pb.gz")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command(stackshotBin, "record", "-d", "60s", "-o", out, fmt.Sprint(tg.PID))
		var se bytes.Buffer
		cmd.Stderr = &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Long enough for the first capture's symbols to load and ticks to
		// run even on a loaded machine (a signal during loading ends the
		// recording before its first tick, with an empty profile).
		time.Sleep(3 * time.Second)
		cmd.Process.Signal(sig)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: exit %v: %s", sig, err, se.String())
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil || len(p.Sample) == 0 {
			t.Fatalf("%v: no valid profile written: %v", sig, err)
		}
		if s := testutil.State(tg.PID); s == "t" || s == "T" {
			t.Errorf("%v: target left stopped", sig)
		}
		os.Remove(out)
	}
}

// TestRecordInterruptEarly: a signal while record sets up (its first
// capture, the symbols' loading) ends it with "interrupted", nothing
// written and exit 1, as a dump; one after ticks began writes what was
// sampled. Never an empty profile said to be written, never the target
// said to have exited, never the target left stopped.
//
// Half the signals go at 2-62 ms after the start (on a loaded machine
// most of those come before stackshot catches signals: it dies of them,
// as any program does, having touched nothing); the other half go 0-28 ms
// after record has begun on the target (it holds a perf event or traces
// a thread: both come after it catches signals), so some always land.
func TestRecordInterruptEarly(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	outcomes := map[string]int{}
	for i := 0; i < 16; i++ {
		out := filepath.Join(t.TempDir(), "p.folded")
		cmd := exec.Command(stackshotBin, "record", "-d", "60s", "-o", out, fmt.Sprint(tg.PID))
		var se bytes.Buffer
		cmd.Stderr = &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		when := fmt.Sprintf("%d ms after the start", 2+4*i)
		if i%2 == 1 {
			when = fmt.Sprintf("%d ms after it began recording", 4*(i/2))
			for end := time.Now().Add(60 * time.Second); !recordingBegun(cmd.Process.Pid, tg.PID); time.Sleep(time.Millisecond) {
				if time.Now().After(end) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("record (pid %d) held no perf event and traced no thread of %d within 60s:\n%s", cmd.Process.Pid, tg.PID, se.String())
				}
			}
			time.Sleep(time.Duration(4*(i/2)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(2+4*i) * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		_, statErr := os.Stat(out)
		msg := se.String()
		switch code := cmd.ProcessState.ExitCode(); {
		case code == -1 && i%2 == 0: // (the signal came before stackshot caught any: nothing was traced)
			outcomes["killed before catching"]++
		case code == 1 && strings.Contains(msg, "interrupted (every thread was detached; nothing written)"):
			outcomes["interrupted, nothing written"]++
			if statErr == nil {
				t.Errorf("%s: says nothing written, but %s exists", when, out)
			}
		case code == 0 && regexp.MustCompile(`interrupted after \S+: [1-9]\d* ticks`).MatchString(msg):
			outcomes["profile written"]++
			if statErr != nil {
				t.Errorf("%s: no profile: %v", when, statErr)
			}
		default:
			t.Errorf("%s: exit %v:\n%s", when, err, msg)
		}
		for _, bad := range []string{"exited", "refused"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: %q in:\n%s", when, bad, msg)
			}
		}
		if s := testutil.State(tg.PID); s == "t" || s == "T" {
			t.Fatalf("%s: target left stopped", when)
		}
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["interrupted, nothing written"]+outcomes["profile written"] == 0 {
		t.Errorf("no signal landed after stackshot caught it: the test proved nothing")
	}
}

// recordingBegun reports whether record (pid ss) has begun on target:
// it holds a perf event, or traces one of target's threads.
func recordingBegun(ss, target int) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", ss))
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", ss, fd.Name())); l == "anon_inode:[perf_event]" {
			return true
		}
	}
	for tid := range testutil.ThreadStates(target) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", target, tid))
		if strings.Contains(string(b), fmt.Sprintf("\nTracerPid:\t%d\n", ss)) {
			return true
		}
	}
	return false
}

func TestRecordKilledLeavesTargetRunning(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "32", "spin")
	for i := 0; i < 5; i++ {
		cmd := exec.Command(stackshotBin, "record", "-q", "-F", "999", "-d", "30s", "-o", filepath.Join(t.TempDir(), "x.folded"), fmt.Sprint(tg.PID))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(300+i*137) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		time.Sleep(10 * time.Millisecond)
		for tid, s := range testutil.ThreadStates(tg.PID) {
			if s == "t" || s == "T" {
				t.Fatalf("round %d: thread %d left %q after SIGKILL of record", i, tid, s)
			}
		}
		if tp := tracerPid(tg.PID); tp != 0 {
			t.Fatalf("round %d: still traced by %d", i, tp)
		}
	}
}

func TestRecordBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"record"},
		{"record", "-F", "0", "1"},
		{"record", "-d", "-1s", "1"},
		{"record", "--format", "png", "1"},
	} {
		_, errOut, code := runSS(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "stackshot: ") {
			t.Errorf("%v: exit %d %q, want 2 and a one-line error", args, code, errOut)
		}
	}
}
