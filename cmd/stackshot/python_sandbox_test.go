//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// TestPythonFramesSandboxed dumps scenes.py run by Debian's CPython 3.11
// as nobody, as root: its memory is parsed in the sandboxed child (by
// default for another user's process, and forced), which reads the
// Python frames. Each thread's Python frames, with their lines, are what
// the program printed of itself, and the same as a --no-sandbox dump's;
// nothing of the target was parsed in stackshot itself.
func TestPythonFramesSandboxed(t *testing.T) {
	needRoot(t)
	setpriv := testutil.Need(t, "setpriv")
	python := "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		testutil.Skip(t, python+" is not installed on this machine")
	}
	bin := hookedBin(t)
	tg := testutil.Start(t, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
		python, testutil.Testdata("python", "scenes.py"))
	var sc scenes
	if err := json.Unmarshal([]byte(strings.TrimPrefix(tg.Ready, "ready ")), &sc); err != nil {
		t.Fatalf("scenes.py's ready line: %v\n%s", err, tg.Ready)
	}
	dump := func(env string, args ...string) (jProc, string, []string) {
		parsed := filepath.Join(t.TempDir(), "inprocess")
		var p jProc
		var se strings.Builder
		var bad []string
		// A dump taken while the busy thread is between two frames
		// may place its frames by order only: the blocked ones never are.
		for try := 0; try < 3; try++ {
			cmd := exec.Command(bin, append(append([]string{"dump", "--json", "--no-cache"}, args...), fmt.Sprint(tg.PID))...)
			cmd.Env = append(os.Environ(), env, "STACKSHOT_TEST_INPROCESS_LOG="+parsed)
			var so strings.Builder
			se.Reset()
			cmd.Stdout, cmd.Stderr = &so, &se
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s %v: %v\n%s", env, args, err, se.String())
			}
			p = jProc{}
			if err := json.Unmarshal([]byte(so.String()), &p); err != nil {
				t.Fatalf("%s %v: bad JSON: %v\n%s", env, args, err, so.String())
			}
			if bad = checkScenes(p, sc); len(bad) == 0 {
				break
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s %v: CPython %s:\n%s\nwarnings: %q\n%s", env, args, sc.Version, strings.Join(bad, "\n"), p.Warnings, se.String())
		}
		if p.Runtime == nil || p.Runtime.Name != "python" || p.Runtime.Version != sc.Version {
			t.Errorf("%s %v: runtime %+v, want python %s", env, args, p.Runtime, sc.Version)
		}
		log, _ := os.ReadFile(parsed)
		return p, se.String(), strings.Fields(string(log))
	}
	plain, _, inProcess := dump("STACKSHOT_SANDBOX=", "--no-sandbox")
	if len(inProcess) == 0 {
		t.Errorf("--no-sandbox: nothing parsed in-process (the log's hook does not see it: the test cannot tell)")
	}
	for _, env := range []string{"STACKSHOT_SANDBOX=", "STACKSHOT_SANDBOX=1"} {
		boxed, stderr, inProcess := dump(env)
		if len(inProcess) > 0 {
			t.Errorf("%s: parsed in-process: %q", env, inProcess)
		}
		if strings.Contains(stderr, "Python frames not read") {
			t.Errorf("%s: %s", env, stderr)
		}
		for name, tid := range sc.Names {
			if name == "busy" {
				continue // (its line moves)
			}
			got, want := pyFrames(pyThread(boxed, tid)), pyFrames(pyThread(plain, tid))
			if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
				t.Errorf("%s: %s (thread %d): Python frames\n  sandboxed  %.400q\n  in-process %.400q", env, name, tid, g, w)
			}
		}
	}
}

// pyThread is p's thread tid (a zero one when p has none).
func pyThread(p jProc, tid int) jThread {
	for _, th := range p.Threads {
		if th.TID == tid {
			return th
		}
	}
	return jThread{}
}

// TestPythonRLockOwnersSandboxed dumps rlocks.py run by Debian's CPython
// 3.11 as nobody, as root: the Python frames and the RLock owners are read
// in the sandboxed child (by default for another user's process, and
// forced). The deadlocks are the program's two cycles and each waiter's
// owner the thread the program says took its RLock (rlockScene), the
// text has a DEADLOCK: line for each, nothing was parsed in stackshot
// itself; a --no-sandbox dump gives the very same waits.
func TestPythonRLockOwnersSandboxed(t *testing.T) {
	needRoot(t)
	setpriv := testutil.Need(t, "setpriv")
	python := "/usr/bin/python3.11"
	if _, err := os.Stat(python); err != nil {
		testutil.Skip(t, python+" is not installed on this machine")
	}
	bin := hookedBin(t)
	tg := testutil.Start(t, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
		python, testutil.Testdata("python", "rlocks.py"))
	sc := readRLockScene(t, tg.Ready)
	run := func(env string, args ...string) (string, []string) {
		parsed := filepath.Join(t.TempDir(), "inprocess")
		cmd := exec.Command(bin, append(append([]string{"dump", "--no-cache"}, args...), fmt.Sprint(tg.PID))...)
		cmd.Env = append(os.Environ(), env, "STACKSHOT_TEST_INPROCESS_LOG="+parsed)
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", env, args, err, se.String())
		}
		if strings.Contains(se.String(), "not read") {
			t.Errorf("%s %v: %s", env, args, se.String())
		}
		log, _ := os.ReadFile(parsed)
		return so.String(), strings.Fields(string(log))
	}
	// dump is the JSON dump that agrees with the scene (the last of a
	// bounded number: a waiter the program saw blocked may still be on
	// its way into the lock's slow path).
	dump := func(env string, args ...string) (dProc, []string) {
		var p dProc
		var bad, inProcess []string
		for try := 0; try < 5 && (try == 0 || len(bad) > 0); try++ {
			var out string
			out, inProcess = run(env, append([]string{"--json"}, args...)...)
			p = dProc{}
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("%s %v: bad JSON: %v\n%s", env, args, err, out)
			}
			bad = sc.check(p)
		}
		if len(bad) > 0 {
			t.Errorf("%s %v:\n%s\n(verdict %q, warnings %q)", env, args, strings.Join(bad, "\n"), p.Verdict, p.Warnings)
		}
		return p, inProcess
	}
	plain, inProcess := dump("STACKSHOT_SANDBOX=", "--no-sandbox")
	if len(inProcess) == 0 {
		t.Errorf("--no-sandbox: nothing parsed in-process (the log's hook does not see it: the test cannot tell)")
	}
	for _, env := range []string{"STACKSHOT_SANDBOX=", "STACKSHOT_SANDBOX=1"} {
		boxed, inProcess := dump(env)
		if len(inProcess) > 0 {
			t.Errorf("%s: parsed in-process: %q", env, inProcess)
		}
		for waiter := range sc.owners {
			got, want := pyWait(boxed, waiter), pyWait(plain, waiter)
			if got != want {
				t.Errorf("%s: thread %d waits for\n  sandboxed  %s\n  in-process %s", env, waiter, got, want)
			}
		}
		text, inProcess := run(env)
		if len(inProcess) > 0 {
			t.Errorf("%s: text: parsed in-process: %q", env, inProcess)
		}
		if bad := sc.checkText(text); len(bad) > 0 {
			t.Errorf("%s: %s\n%s", env, strings.Join(bad, "\n"), text)
		}
	}
}

// pyWait is what thread tid of p waits for, in one line.
func pyWait(p dProc, tid int) string {
	for _, th := range p.Threads {
		if w := th.WaitingFor; th.TID == tid && w != nil {
			owner := "nobody known"
			if w.OwnerTID != nil {
				owner = fmt.Sprint(*w.OwnerTID)
			}
			return fmt.Sprintf("%s at %s held by %s: %s", w.Kind, deref(w.Address), owner, w.Note)
		}
	}
	return "nothing"
}
