//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// pythons are the CPython interpreters the Python tests run: Debian's
// (and its debug build), and each 3.8-3.13 under $(pyenv root)/versions.
func pythons() []struct{ name, path string } {
	out := []struct{ name, path string }{{"debian-3.11", "/usr/bin/python3.11"}, {"debian-3.11-dbg", "/usr/bin/python3.11-dbg"}}
	root := os.Getenv("PYENV_ROOT")
	if b, err := exec.Command("pyenv", "root").Output(); err == nil {
		root = strings.TrimSpace(string(b))
	}
	for minor := 8; minor <= 13; minor++ {
		v := fmt.Sprintf("3.%d", minor)
		path := filepath.Join(root, "versions", v+".*", "bin", "python"+v)
		if m, _ := filepath.Glob(path); len(m) > 0 && root != "" {
			path = m[len(m)-1]
		}
		out = append(out, struct{ name, path string }{"pyenv-" + v, path})
	}
	return out
}

// scenes is what testdata/python/scenes.py says of itself at ready time.
type scenes struct {
	Threads map[string][][4]any `json:"threads"` // [name, qualname, file, line], innermost first
	Names   map[string]int      `json:"names"`
	PyNames map[string]string   `json:"pynames"` // threading names by native thread id
	Version string              `json:"version"`
}

// startScenes runs scenes.py under python and reads its own account.
func startScenes(t *testing.T, python string) (*testutil.Target, scenes) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		testutil.Skip(t, python+" is not installed on this machine")
	}
	tg := testutil.Start(t, python, testutil.Testdata("python", "scenes.py"))
	var sc scenes
	if err := json.Unmarshal([]byte(strings.TrimPrefix(tg.Ready, "ready ")), &sc); err != nil {
		t.Fatalf("scenes.py's ready line: %v\n%s", err, tg.Ready)
	}
	return tg, sc
}

// pyFrames lists a thread's Python frames as [qualname, file, line].
func pyFrames(th jThread) []string {
	var out []string
	for _, f := range th.Frames {
		if f.Kind == "python" {
			out = append(out, fmt.Sprintf("%s %s:%d", f.QualName, f.File, f.Line))
		}
	}
	return out
}

// TestPythonFrames dumps scenes.py under every CPython here and compares
// each thread's Python frames, frame by frame with lines, with what the
// program printed of itself (sys._current_frames()), checks that the one
// thread running Python holds the GIL, that each thread's python_name is
// its threading name (MainThread, non-ASCII ones, one with a control
// character, one renamed once started) and the text's header says it,
// and checks where the frames sit
// among the native frames: each run inside an eval frame, and
// the ctypes callback's frames inside qsort, inside sort_with_callback.
func TestPythonFrames(t *testing.T) {
	for _, py := range pythons() {
		t.Run(py.name, func(t *testing.T) {
			tg, sc := startScenes(t, py.path)
			var p jProc
			var mismatch []string
			// A dump taken while the busy thread is between two frames
			// may place that thread's frames by order only: the blocked
			// ones never are.
			for try := 0; try < 3; try++ {
				p = dumpJSON(t, "-p", strconv.Itoa(tg.PID))
				if mismatch = checkScenes(p, sc); len(mismatch) == 0 {
					break
				}
			}
			if len(mismatch) > 0 {
				t.Fatalf("CPython %s:\n%s\nwarnings: %q", sc.Version, strings.Join(mismatch, "\n"), p.Warnings)
			}
			if p.Runtime == nil || p.Runtime.Name != "python" || p.Runtime.Version != sc.Version {
				t.Errorf("runtime %+v, want python %s", p.Runtime, sc.Version)
			}
			// The text's headers: the threading name beside the
			// system's, a control character in it escaped.
			text := dumpText(t, "-p", strconv.Itoa(tg.PID))
			for _, want := range []string{`python "worker-1"`, `python "MainThread"`, `python "esc\x1b[2J\abell"`, `python "renamed"`} {
				if !regexp.MustCompile(`\nThread \d+ "[^"\n]*" \(state [^,]+, ` + regexp.QuoteMeta(want)).MatchString(text) {
					t.Errorf("no thread's header says %s:\n%s", want, text)
				}
			}
			if strings.Contains(text, "\x1b") {
				t.Errorf("the text holds an escape character")
			}
			off := dumpJSON(t, "--no-python", "-p", strconv.Itoa(tg.PID))
			for _, th := range off.Threads {
				if th.PythonName != "" {
					t.Errorf("--no-python: thread %d has Python name %q", th.TID, th.PythonName)
				}
				if n := len(pyFrames(th)); n > 0 {
					t.Errorf("--no-python: thread %d has %d Python frames", th.TID, n)
				}
			}
		})
	}
}

// checkScenes compares dump p with the program's account sc; it returns
// what differs.
func checkScenes(p jProc, sc scenes) (bad []string) {
	byTID := map[int]jThread{}
	for _, th := range p.Threads {
		byTID[th.TID] = th
	}
	if len(sc.PyNames) < 2 {
		bad = append(bad, fmt.Sprintf("scenes.py printed %d threading names", len(sc.PyNames)))
	}
	for tid, name := range sc.PyNames {
		id, _ := strconv.Atoi(tid)
		if th, ok := byTID[id]; !ok || th.PythonName != name {
			bad = append(bad, fmt.Sprintf("thread %s: Python name %q, want %q", tid, th.PythonName, name))
		}
	}
	for name, tid := range sc.Names {
		th, ok := byTID[tid]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: thread %d not in the dump", name, tid))
			continue
		}
		var want []string
		for _, f := range sc.Threads[strconv.Itoa(tid)] {
			want = append(want, fmt.Sprintf("%s %s:%v", f[1], f[2], f[3]))
		}
		got := pyFrames(th)
		if name == "busy" { // its line moves: the functions only
			want, got = stripLines(want), stripLines(got)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			bad = append(bad, fmt.Sprintf("%s (thread %d): Python frames\n  got  %q\n  want %q", name, tid, got, want))
			continue
		}
		// The busy thread is the only one that runs: it holds the GIL
		// (no other asks for it), and no other does.
		if th.GIL != (name == "busy") {
			bad = append(bad, fmt.Sprintf("%s (thread %d): holds the GIL: %v", name, tid, th.GIL))
		}
		if why := placement(th, name); why != "" {
			bad = append(bad, fmt.Sprintf("%s (thread %d): %s", name, tid, why))
		}
	}
	return bad
}

func stripLines(fs []string) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f[:strings.LastIndexByte(f, ':')]
	}
	return out
}

// placement checks that each run of Python frames ends just inside a
// native eval frame, and for the ctypes callback that qsort lies between
// compare and sort_with_callback.
func placement(th jThread, name string) string {
	fs := th.Frames
	var seq []string
	for i, f := range fs {
		if f.Kind == "python" {
			seq = append(seq, "py:"+f.QualName)
			if i+1 < len(fs) && fs[i+1].Kind != "python" && !strings.HasPrefix(fs[i+1].Fn(), "_PyEval_EvalFrameDefault") {
				return fmt.Sprintf("Python frame %s is not just inside an eval frame (next: %s)", f.QualName, fs[i+1].Fn())
			}
		} else if f.Kind == "user" && (f.Fn() == "qsort" || strings.HasPrefix(f.Fn(), "msort")) {
			seq = append(seq, "qsort")
		}
	}
	if name == "callback" && !hasSubseq(seq, []string{"py:compare", "qsort", "py:sort_with_callback"}) {
		return fmt.Sprintf("the callback's frames are not inside qsort: %q", seq)
	}
	return ""
}

// BenchmarkPythonDump: a 50-thread CPython 3.11 process (Debian's), each
// thread asleep 10 Python calls deep, dumped with its Python frames and
// with --no-python (the goal: at most 1.2x).
func BenchmarkPythonDump(b *testing.B) {
	py := testutil.Need(b, "/usr/bin/python3.11")
	tg := testutil.Start(b, py, testutil.Testdata("python", "many.py"), "50")
	for _, run := range []struct {
		name string
		args []string
	}{{"python", nil}, {"no-python", []string{"--no-python"}}} {
		b.Run(run.name, func(b *testing.B) {
			args := append([]string{"dump"}, append(run.args, "-p", strconv.Itoa(tg.PID))...)
			for i := 0; i < b.N; i++ {
				if out, err := exec.Command(stackshotBin, args...).Output(); err != nil {
					b.Fatalf("%v: %v", args, err)
				} else if want := run.name == "python"; strings.Contains(string(out), "[python]") != want {
					b.Fatalf("%v: Python frames shown: %v", args, !want)
				}
			}
		})
	}
}

// TestPythonRecordShares records hot.py under Debian's CPython 3.11: its
// two hot Python functions appear in the folded stacks, with the shares
// of the samples the program's own clock gives them, within 10
// points.
func TestPythonRecordShares(t *testing.T) {
	py := testutil.Need(t, "/usr/bin/python3.11")
	tg := testutil.Start(t, py, testutil.Testdata("python", "hot.py"))
	spent := func() (a, b float64) {
		fmt.Sscan(tg.Ask("spent"), &a, &b)
		return a, b
	}
	a0, b0 := spent()
	out := filepath.Join(t.TempDir(), "p.folded")
	_, errOut, code := runSS(t, "record", "-F", "99", "-d", "3s", "-o", out, strconv.Itoa(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	a1, b1 := spent()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := foldedShares(t, string(data), "hot_a", "hot_b")
	if got["hot_a"]+got["hot_b"] < 50 {
		t.Fatalf("only %d samples in hot_a+hot_b:\n%s", got["hot_a"]+got["hot_b"], data)
	}
	want := (a1 - a0) / (a1 - a0 + b1 - b0)
	share := float64(got["hot_a"]) / float64(got["hot_a"]+got["hot_b"])
	if share < want-0.1 || share > want+0.1 {
		t.Errorf("hot_a has %.0f%% of the samples in hot_a or hot_b (%d/%d); the program spent %.0f%% of that time in it",
			share*100, got["hot_a"], got["hot_a"]+got["hot_b"], want*100)
	}
	t.Logf("hot_a %.1f%% of samples, %.1f%% of the program's time", share*100, want*100)
}

// TestPythonGarbage dumps a process that looks like CPython 3.11 but
// whose _PyRuntime points only at itself: native frames, no Python ones,
// warnings saying what did not check out.
func TestPythonGarbage(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("python", "garbage.c")}, "-O0", "-g", "-rdynamic")
	exe := filepath.Join(t.TempDir(), "python3.11")
	if out, err := exec.Command("cp", bin, exe).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	tg := testutil.Start(t, exe)
	p := dumpJSON(t, "-p", strconv.Itoa(tg.PID))
	if len(p.Threads) != 1 {
		t.Fatalf("%d threads", len(p.Threads))
	}
	assertMainChain(t, p.Threads[0], "__GI___libc_read", "main")
	if n := len(pyFrames(p.Threads[0])); n > 0 {
		t.Errorf("%d Python frames read from garbage", n)
	}
	if p.Runtime == nil || p.Runtime.Name != "python" || p.Runtime.Version != "3.11.2" {
		t.Errorf("runtime %+v, want python 3.11.2 (Py_Version)", p.Runtime)
	}
	said := strings.Join(p.Warnings, "\n")
	if !strings.Contains(said, "does not end") || !strings.Contains(said, "Python frames") {
		t.Errorf("warnings do not say what did not check out: %q", p.Warnings)
	}
}

// TestPythonVsGdbPyBt compares each blocked thread's Python frames with
// those gdb's py-bt (python3.11-dbg's gdb extension) prints for it: file,
// line and function, frame by frame.
func TestPythonVsGdbPyBt(t *testing.T) {
	gdb := testutil.Need(t, "gdb")
	py := testutil.Need(t, "/usr/bin/python3.11-dbg")
	tg, sc := startScenes(t, py)
	p := dumpJSON(t, "-p", strconv.Itoa(tg.PID))
	out, err := exec.Command(gdb, "-p", strconv.Itoa(tg.PID), "-batch", "-ex", "thread apply all py-bt").CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	want := map[int][]string{} // by LWP
	lwp := 0
	for _, l := range strings.Split(string(out), "\n") {
		if i := strings.Index(l, "(LWP "); strings.HasPrefix(l, "Thread ") && i > 0 {
			fmt.Sscan(l[i+5:], &lwp)
		}
		var file, fn string
		var line int
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "File \"") {
			rest := l[len("File \""):]
			q := strings.IndexByte(rest, '"')
			file = rest[:q]
			if _, err := fmt.Sscanf(rest[q+1:], ", line %d, in %s", &line, &fn); err == nil {
				want[lwp] = append(want[lwp], fmt.Sprintf("%s %s:%d", fn, file, line))
			}
		}
	}
	compared := 0
	for _, th := range p.Threads {
		if th.TID == sc.Names["busy"] {
			continue // it runs: gdb stops it elsewhere
		}
		var got []string
		for _, f := range th.Frames {
			if f.Kind == "python" {
				got = append(got, fmt.Sprintf("%s %s:%d", f.Fn(), f.File, f.Line))
			}
		}
		if strings.Join(got, "\n") != strings.Join(want[th.TID], "\n") {
			t.Errorf("thread %d:\n  stackshot %q\n  py-bt     %q", th.TID, got, want[th.TID])
		}
		compared += len(got)
	}
	if compared < 500 {
		t.Errorf("only %d frames compared (the recursion alone has 500)", compared)
	}
}

// TestPythonLockWaits: threads blocked in each of the threading module's
// waits (locks.py) say they wait for a Python lock of the class the
// program used, what that means for an owner, and the Python line that
// asked (found in locks.py's source); the RLock names its owner (main,
// which took it) and is the RLock the program printed the id() of, the
// others none. The text says the same in the contract's words. Every
// CPython the machine has (before 3.11 a frame has no qualified name: an
// Event's wait is said to be the Condition's it waits in; 3.13 joins a
// thread without a threading lock).
func TestPythonLockWaits(t *testing.T) {
	src := testutil.Testdata("python", "locks.py")
	text, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(code string) int {
		for i, l := range strings.Split(string(text), "\n") {
			if strings.TrimSpace(l) == code {
				return i + 1
			}
		}
		t.Fatalf("%q not in locks.py", code)
		return 0
	}
	for _, py := range pythons() {
		t.Run(py.name, func(t *testing.T) {
			tg := testutil.Start(t, testutil.Need(t, py.path), src)
			var ids map[string]int
			if err := json.Unmarshal([]byte(strings.TrimPrefix(tg.Ready, "ready ")), &ids); err != nil {
				t.Fatal(err)
			}
			event := "threading.Event: it waits to be set"
			if ids["version"] < 311 {
				event = "threading.Condition: it waits to be notified"
			}
			asked := func(fn, code string) string { return fmt.Sprintf("; asked at %s (%s:%d)", fn, src, lineOf(code)) }
			want := map[string]string{ // kind: class: note (no owner), or the owner
				"lock":    "python-lock: threading.Lock: it records no owner" + asked("take_lock", "lock.acquire()"),
				"rlock":   fmt.Sprintf("python-rlock: threading.RLock: held by %d", tg.PID),
				"queue":   "python-lock: queue.Queue: it waits for an item" + asked("take_item", "q.get()"),
				"put":     "python-lock: queue.Queue: it waits for a free slot" + asked("put_item", "full.put(1)"),
				"cond":    "python-lock: threading.Condition: it waits to be notified" + asked("take_cond", "cond.wait()"),
				"sem":     "python-lock: threading.Semaphore: it waits for a release" + asked("take_sem", "sem.acquire()"),
				"event":   "python-lock: " + event + asked("take_event", "event.wait()"),
				"barrier": "python-lock: threading.Barrier: it waits for the other threads" + asked("take_barrier", "barrier.wait()"),
				"join":    "python-lock: threading.Thread: it waits for the thread to end" + asked("take_join", "sleeper.join()"),
			}
			if ids["version"] >= 313 {
				delete(want, "join")
			}
			p := dumpJSON(t, "-p", strconv.Itoa(tg.PID))
			out, _, _ := runSS(t, "dump", "-p", strconv.Itoa(tg.PID))
			for name, w := range want {
				th := jThread{}
				for _, x := range p.Threads {
					if x.TID == ids[name] {
						th = x
					}
				}
				wf := th.WaitingFor
				if wf == nil {
					t.Errorf("%s (thread %d): waits for nothing, want %s", name, ids[name], w)
					continue
				}
				got := fmt.Sprintf("%s: %s: %s", wf.Kind, wf.Class, wf.Note)
				line := fmt.Sprintf("    --- waiting for Python lock %s (%s) ---\n", deref(wf.Address), strings.TrimPrefix(w, wf.Kind+": "))
				if wf.OwnerTID != nil {
					got = fmt.Sprintf("%s: %s: held by %d", wf.Kind, wf.Class, *wf.OwnerTID)
					// (the owner, the main thread, named by its threading
					// name: its system name is only the process's)
					line = fmt.Sprintf("    --- waiting for Python lock %#x (threading.RLock held by thread %d \"MainThread\") ---\n", ids["rlock_id"], tg.PID)
				}
				if got != w {
					t.Errorf("%s (thread %d): waiting for\n  %s\nwant\n  %s", name, ids[name], got, w)
				}
				if !strings.Contains(out, line) {
					t.Errorf("%s (thread %d): the text has no line\n%s", name, ids[name], line)
				}
			}
		})
	}
}
