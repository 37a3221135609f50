//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// recordPython records target pid for 3 s with the hooked binary (args
// added, env set) and returns the folded profile, stderr, and what was
// parsed in stackshot itself (the in-process parse counter's log).
func recordPython(t *testing.T, pid int, env string, args ...string) (folded, stderr string, inProcess []string) {
	t.Helper()
	parsed := filepath.Join(t.TempDir(), "inprocess")
	out := filepath.Join(t.TempDir(), "p.folded")
	// Long enough for the target to run 2.5 s of CPU (3 s when idle, at
	// most 15 s): its shares need a few hundred samples on a loaded machine too.
	d := testutil.WallFor(pid, 2500*time.Millisecond, 3*time.Second, 15*time.Second)
	args = append([]string{"record", "-F", "99", "-d", d.String(), "--no-cache", "-o", out}, args...)
	cmd := exec.Command(hookedBin(t), append(args, fmt.Sprint(pid))...)
	cmd.Env = append(os.Environ(), "STACKSHOT_SANDBOX=", env, "STACKSHOT_TEST_INPROCESS_LOG="+parsed)
	var se strings.Builder
	cmd.Stderr = &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", env, args, err, se.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(parsed)
	return string(data), se.String(), strings.Fields(string(log))
}

// TestPythonRecordSandboxed records hot.py, run by Debian's CPython 3.11
// as nobody, as root: the sandboxed child (by default, and forced) reads
// its Python frames at each tick. hot_a and hot_b are in the folded
// stacks, each run's share of hot_a within 10 points of the time the
// program's own clock gave it meanwhile and of a --no-sandbox run's;
// nothing of the target was parsed in stackshot itself.
func TestPythonRecordSandboxed(t *testing.T) {
	needRoot(t)
	setpriv := testutil.Need(t, "setpriv")
	py := testutil.Need(t, "/usr/bin/python3.11")
	tg := testutil.Start(t, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
		py, testutil.Testdata("python", "hot.py"))
	spent := func() (a, b float64) {
		fmt.Sscan(tg.Ask("spent"), &a, &b)
		return a, b
	}
	share := func(env string, args ...string) (got, want float64, inProcess []string) {
		a0, b0 := spent()
		folded, stderr, inProcess := recordPython(t, tg.PID, env, args...)
		a1, b1 := spent()
		if strings.Contains(stderr, "Python frames") {
			t.Errorf("%s %v: %s", env, args, stderr)
		}
		n, _ := foldedShares(t, folded, "hot_a", "hot_b")
		if n["hot_a"]+n["hot_b"] < 50 {
			t.Fatalf("%s %v: only %d samples in hot_a+hot_b:\n%s\n%s", env, args, n["hot_a"]+n["hot_b"], folded, stderr)
		}
		got = float64(n["hot_a"]) / float64(n["hot_a"]+n["hot_b"])
		want = (a1 - a0) / (a1 - a0 + b1 - b0)
		if got < want-0.1 || got > want+0.1 {
			t.Errorf("%s %v: hot_a has %.0f%% of the samples in hot_a or hot_b (%d/%d); the program spent %.0f%% of that time in it",
				env, args, got*100, n["hot_a"], n["hot_a"]+n["hot_b"], want*100)
		}
		t.Logf("%s %v: hot_a %.1f%% of samples, %.1f%% of the program's time", env, args, got*100, want*100)
		return got, want, inProcess
	}
	plain, _, inProcess := share("STACKSHOT_SANDBOX=", "--no-sandbox")
	if len(inProcess) == 0 {
		t.Errorf("--no-sandbox: nothing parsed in-process (the log's hook does not see it: the test cannot tell)")
	}
	for _, env := range []string{"STACKSHOT_SANDBOX=", "STACKSHOT_SANDBOX=1"} {
		boxed, _, inProcess := share(env)
		if len(inProcess) > 0 {
			t.Errorf("%s: parsed in-process: %q", env, inProcess)
		}
		if boxed < plain-0.1 || boxed > plain+0.1 {
			t.Errorf("%s: hot_a has %.0f%% of the samples sandboxed, %.0f%% in-process", env, boxed*100, plain*100)
		}
	}
}

// TestRecordSandboxNotPython: record of another user's process that runs
// no CPython (blocked.c) says nothing of Python, and its Python-free
// stacks are as before.
func TestRecordSandboxNotPython(t *testing.T) {
	tg := startBusyService(t)
	folded, stderr, inProcess := recordPython(t, tg.PID, "STACKSHOT_SANDBOX=")
	if strings.Contains(stderr, "Python frames") {
		t.Errorf("stderr: %s", stderr)
	}
	if len(inProcess) > 0 {
		t.Errorf("parsed in-process: %q", inProcess)
	}
	if n, _ := foldedShares(t, folded, "spin_c"); n["spin_c"] == 0 {
		t.Errorf("no sample in spin_c:\n%s", folded)
	}
}

// TestPythonRecordNoPython: record --no-python of hot.py (another user's,
// parsed in the sandboxed child by default, and in-process with
// --no-sandbox) keeps the interpreter's native frames and no Python ones.
func TestPythonRecordNoPython(t *testing.T) {
	needRoot(t)
	setpriv := testutil.Need(t, "setpriv")
	py := testutil.Need(t, "/usr/bin/python3.11")
	tg := testutil.Start(t, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
		py, testutil.Testdata("python", "hot.py"))
	for _, args := range [][]string{{"--no-python"}, {"--no-python", "--no-sandbox"}} {
		folded, stderr, _ := recordPython(t, tg.PID, "STACKSHOT_SANDBOX=", args...)
		n, total := foldedShares(t, folded, "hot_a", "hot_b", "run", "_PyEval_EvalFrameDefault")
		if n["hot_a"]+n["hot_b"]+n["run"] > 0 || strings.Contains(stderr, "Python frames") {
			t.Errorf("%v: Python frames recorded (hot_a %d, hot_b %d, run %d):\n%s", args, n["hot_a"], n["hot_b"], n["run"], stderr)
		}
		if n["_PyEval_EvalFrameDefault"] == 0 || total == 0 {
			t.Errorf("%v: no sample in the interpreter's eval function (%d samples):\n%s", args, total, folded)
		}
	}
}

// TestRecordNoJava: record --no-java of Hot.java keeps samples but names
// no Java method (the JIT's code is walked as code without unwind info).
func TestRecordNoJava(t *testing.T) {
	testutil.Need(t, "javac")
	testutil.Need(t, "jar")
	java := testutil.Need(t, "java")
	jar := testutil.Artifact(t, "hot.jar", testutil.Testdata("hotspot"),
		[]string{"javac", "-d", "$DIR/classes", "$SRC/Hot.java"},
		[]string{"jar", "cf", "$OUT", "-C", "$DIR/classes", "."})
	tg := testutil.StartWithin(t, 3*time.Minute, java, "-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,Hot::*", "-cp", jar, "Hot")
	for _, java := range []bool{true, false} {
		out := filepath.Join(t.TempDir(), "p.folded")
		args := []string{"record", "-F", "99", "-d", "2s", "-o", out}
		if !java {
			args = append(args, "--no-java")
		}
		if _, errOut, code := runSS(t, append(args, fmt.Sprint(tg.PID))...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		n, total := foldedShares(t, string(b), "Hot.hotA", "Hot.hotB")
		if total == 0 || (n["Hot.hotA"]+n["Hot.hotB"] > 0) != java {
			t.Errorf("%v: Hot.hotA %d, Hot.hotB %d of %d samples:\n%s", args, n["Hot.hotA"], n["Hot.hotB"], total, b)
		}
	}
}

// BenchmarkPythonRecordOverhead measures what `record -F 99` costs a busy
// pure-Python process (spin.py: one thread, Python three calls deep, its
// own count of calls done), as BenchmarkRecordOverhead does for native
// code: against the same run alone, beside `perf record -F 99
// --call-graph dwarf` (and fp) where perf works. The target runs as
// nobody when stackshot is root, so stackshot reads its Python frames in
// the sandboxed child (stackshot); also --no-sandbox (in-process) and
// --no-python.
func BenchmarkPythonRecordOverhead(b *testing.B) {
	py := testutil.Need(b, "/usr/bin/python3.11")
	argv := []string{py, testutil.Testdata("python", "spin.py")}
	if os.Geteuid() == 0 {
		argv = append([]string{testutil.Need(b, "setpriv"), "--reuid", "65534", "--regid", "65534", "--clear-groups", "--"}, argv...)
	}
	const secs = 4.0
	dir := b.TempDir()
	stackshot := func(args ...string) func(pid int) *exec.Cmd {
		return func(pid int) *exec.Cmd {
			args := append([]string{"record", "-q", "-F", "99", "-d", fmt.Sprintf("%gs", secs), "-o", filepath.Join(dir, "s.folded")}, args...)
			return exec.Command(stackshotBin, append(args, fmt.Sprint(pid))...)
		}
	}
	profilers := perfProfilers(dir, secs)
	profilers["stackshot"] = stackshot()
	profilers["stackshot-no-sandbox"] = stackshot("--no-sandbox")
	profilers["stackshot-no-python"] = stackshot("--no-python")
	measureOverhead(b, profilers, func(pf func(pid int) *exec.Cmd) (int64, int64, int64) {
		return runWorker(b, append(argv, fmt.Sprint(secs)), secs, pf)
	})
}
