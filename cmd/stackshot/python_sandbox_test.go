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
