//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// TestPythonRLockDeadlocks: rlocks.py's two RLock cycles (ABBA between two
// threads, a ring of three) are the process's two deadlocks, each thread's
// RLock owner the thread the program says took it; an RLock held by a
// sleeping thread names that thread as owner and closes no cycle; a plain
// Lock's waiter names no owner. Every CPython the machine has.
func TestPythonRLockDeadlocks(t *testing.T) {
	for _, py := range pythons() {
		t.Run(py.name, func(t *testing.T) {
			python := testutil.Need(t, py.path)
			tg := testutil.Start(t, python, testutil.Testdata("python", "rlocks.py"))
			sc := readRLockScene(t, tg.Ready)
			var p dProc
			var bad []string
			// (a waiter seen blocked by the program may still be on its way
			// into the lock's slow path: read again, a bounded number of times)
			for try := 0; try < 5 && (try == 0 || len(bad) > 0); try++ {
				p = diagJSON(t, "-p", strconv.Itoa(tg.PID))
				bad = sc.check(p)
			}
			if len(bad) > 0 {
				t.Fatalf("%s\n(verdict %q)", strings.Join(bad, "\n"), p.Verdict)
			}
			out, _, _ := runSS(t, "dump", "-p", strconv.Itoa(tg.PID))
			if bad := sc.checkText(out); len(bad) > 0 {
				t.Errorf("%s\n%s", strings.Join(bad, "\n"), out)
			}
		})
	}
}

// rlockScene is what rlocks.py says of itself at ready time: the owner of
// the RLock each waiter waits for, that RLock's id(), the two cycles.
type rlockScene struct {
	owners, lock map[int]string // by waiter: the owner's tid, the RLock's address
	cycles       string         // (deadlockSets' form)
	held, plain  int            // held-wait (its RLock held twice), lock-wait (a plain Lock)
	abba         [2]int         // abba-1, abba-2
}

func readRLockScene(t *testing.T, ready string) rlockScene {
	t.Helper()
	v := readyVals(t, ready)
	tid := func(name string) int { return tidOf(t, v, name) }
	a1, a2 := tid("abba-1"), tid("abba-2")
	r := []int{tid("ring-0"), tid("ring-1"), tid("ring-2")}
	sc := rlockScene{owners: map[int]string{}, lock: map[int]string{}, held: tid("held-wait"), plain: tid("lock-wait"), abba: [2]int{a1, a2}}
	for _, w := range []struct {
		waiter, owner int
		lock          string
	}{{a1, a2, "b"}, {a2, a1, "a"}, {r[0], r[1], "ring1"}, {r[1], r[2], "ring2"}, {r[2], r[0], "ring0"}, {sc.held, tid("holder"), "held"}} {
		sc.owners[w.waiter], sc.lock[w.waiter] = strconv.Itoa(w.owner), addrOf(t, v, w.lock)
	}
	cycles := []string{fmt.Sprint(sorted(a1, a2)), fmt.Sprint(sorted(r...))}
	sort.Strings(cycles)
	sc.cycles = strings.Join(cycles, "; ")
	return sc
}

// check says how p differs from the scene: its deadlocks, each waiter's
// wait (kind, owner, the RLock's address), the held RLock's count, the
// plain Lock's waiter naming no owner and saying why.
func (sc rlockScene) check(p dProc) []string {
	var bad []string
	if got := deadlockSets(p); got != sc.cycles {
		bad = append(bad, fmt.Sprintf("deadlocks %s, want %s", got, sc.cycles))
	}
	if len(bad) == 0 && !strings.HasPrefix(p.Verdict, "2 deadlocks") {
		bad = append(bad, fmt.Sprintf("verdict %q, want 2 deadlocks first", p.Verdict))
	}
	waits := map[int]*testutil.WaitingFor{}
	for _, th := range p.Threads {
		waits[th.TID] = th.WaitingFor
	}
	for waiter, owner := range sc.owners {
		switch w := waits[waiter]; {
		case w == nil:
			bad = append(bad, fmt.Sprintf("thread %d waits for nothing, want an RLock held by %s", waiter, owner))
		case w.Kind != "python-rlock" || w.OwnerTID == nil || strconv.Itoa(*w.OwnerTID) != owner:
			bad = append(bad, fmt.Sprintf("thread %d waits for %s held by %v (%s), want python-rlock held by %s", waiter, w.Kind, w.OwnerTID, w.Note, owner))
		case w.Address == nil || *w.Address != sc.lock[waiter]:
			bad = append(bad, fmt.Sprintf("thread %d waits for the RLock at %v, want %s (its id())", waiter, w.Address, sc.lock[waiter]))
		}
	}
	if w := waits[sc.held]; w != nil && !strings.Contains(w.Note, "held 2 time(s)") {
		bad = append(bad, fmt.Sprintf("held-wait's note %q, want %q (holder.acquire twice)", w.Note, "held 2 time(s)"))
	}
	switch w := waits[sc.plain]; {
	case w == nil:
		bad = append(bad, "lock-wait waits for nothing")
	case w.Kind != "python-lock" || w.Class != "threading.Lock" || w.OwnerTID != nil || !strings.HasPrefix(w.Note, "it records no owner; asked at waiter ("):
		bad = append(bad, fmt.Sprintf("lock-wait waits for %s held by %v (%s), want python-lock, no owner, the note saying why", w.Kind, w.OwnerTID, w.Note))
	}
	return bad
}

// checkText says how the text dump out of the scene's process differs
// from the scene: two DEADLOCK: lines, the ABBA cycle's in the contract's
// words (from either of its threads), each thread named by its threading
// name (abba-1, abba-2: the system names both only after the process).
func (sc rlockScene) checkText(out string) []string {
	var bad []string
	if n := strings.Count(out, "\nDEADLOCK: "); n != 2 {
		bad = append(bad, fmt.Sprintf("%d DEADLOCK: lines in the text, want 2", n))
	}
	name := map[int]string{sc.abba[0]: "abba-1", sc.abba[1]: "abba-2"}
	line := func(a, b int) string {
		return fmt.Sprintf("\nDEADLOCK: thread %d %q waits for Python lock %s (threading.RLock held by thread %d %q), which waits for Python lock %s (threading.RLock held by thread %d %q)\n",
			a, name[a], sc.lock[a], b, name[b], sc.lock[b], a, name[a])
	}
	a1, a2 := sc.abba[0], sc.abba[1]
	if !strings.Contains(out, line(a1, a2)) && !strings.Contains(out, line(a2, a1)) {
		bad = append(bad, fmt.Sprintf("no DEADLOCK: line%s", line(a1, a2)))
	}
	return bad
}

// deadlockSets is each deadlock's threads, sorted, the cycles sorted.
func deadlockSets(p dProc) string {
	if p.Deadlocks == nil {
		return "<none>"
	}
	var out []string
	for _, d := range *p.Deadlocks {
		out = append(out, fmt.Sprint(sorted(d.TIDs...)))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func sorted(v ...int) []int {
	s := append([]int(nil), v...)
	sort.Ints(s)
	return s
}

// TestPythonGILVerdict: of gil.py's four threads spinning in pure Python,
// one holds the GIL ("gil": true, running Python in spin's loop, whose
// line the program prints) and the verdict says the three others wait
// for the GIL held by it; each of the three names it as owner. The GIL
// changes hands every few milliseconds: a dump whose stacks and GIL read
// disagree (no thread marked, or fewer than three waiting) is taken again,
// a bounded number of times. Every CPython the machine has.
func TestPythonGILVerdict(t *testing.T) {
	for _, py := range pythons() {
		t.Run(py.name, func(t *testing.T) { gilVerdict(t, testutil.Need(t, py.path)) })
	}
}

func gilVerdict(t *testing.T, py string) {
	src := testutil.Testdata("python", "gil.py")
	tg := testutil.Start(t, py, src)
	v := readyVals(t, tg.Ready)
	spin := map[int]bool{}
	spinName := map[int]string{} // (each thread's threading name)
	for i := 0; i < 4; i++ {
		tid := tidOf(t, v, fmt.Sprintf("spin-%d", i))
		spin[tid], spinName[tid] = true, fmt.Sprintf("spin-%d", i)
	}
	loop := tidOf(t, v, "loop")
	var p dProc
	holder := 0
	for try := 0; try < 30 && holder == 0; try++ {
		p = diagJSON(t, "-p", strconv.Itoa(tg.PID))
		holder = gilHolder(p, spin)
	}
	if holder == 0 {
		t.Fatalf("no dump of 30 had one spinning thread holding the GIL and three waiting for it; last verdict %q", p.Verdict)
	}
	// (named by their threading names: the system's are all the process's)
	want := fmt.Sprintf("3 threads (%q) wait for the GIL held by thread %d %q, which is running Python at %s:", "spin-*", holder, spinName[holder], src)
	if !strings.Contains(p.Verdict, want) {
		t.Fatalf("verdict %q, want it to say %q", p.Verdict, want)
	}
	at := p.Verdict[strings.Index(p.Verdict, want)+len(want):]
	if line, _, _ := strings.Cut(at, ";"); line != strconv.Itoa(loop) && line != strconv.Itoa(loop+1) {
		t.Errorf("the holder runs Python at line %s, want spin's loop (%d or %d)", line, loop, loop+1)
	}
}

// gilHolder is the spinning thread marked as holding the GIL when the
// three other spinning threads wait for the GIL held by it; else 0.
func gilHolder(p dProc, spin map[int]bool) int {
	holder, waiting := 0, 0
	for _, th := range p.Threads {
		if spin[th.TID] && th.GIL {
			holder = th.TID
		}
	}
	for _, th := range p.Threads {
		w := th.WaitingFor
		if w == nil || w.Kind != "python-gil" {
			continue
		}
		if !spin[th.TID] {
			// (main, just after its ready line, waits for the GIL to
			// call time.sleep: the verdict would count it too; the next
			// dump finds it asleep)
			return 0
		}
		if w.OwnerTID != nil && *w.OwnerTID == holder {
			waiting++
		}
	}
	if waiting != 3 {
		return 0
	}
	return holder
}

// TestPythonEmbedded: CPython is found wherever _PyRuntime is, whatever
// the file's name: a C program with libpython3.11.a linked in, one
// linked against libpython3.11.so, and Debian's python3.11 copied under
// another name. Each runs embed.py, whose main thread says where it
// sleeps (wait_here, its line) and its release.
func TestPythonEmbedded(t *testing.T) {
	config := testutil.Need(t, "/usr/bin/python3.11-config")
	py := testutil.Need(t, "/usr/bin/python3.11")
	flags := func(args ...string) []string {
		out, err := exec.Command(config, args...).Output()
		if err != nil {
			t.Fatalf("%s %v: %v", config, args, err)
		}
		return strings.Fields(string(out))
	}
	src := []string{testutil.Testdata("python", "embed.c")}
	cflags := append(flags("--embed", "--cflags"), "-O1")
	dir := flags("--configdir")
	static := slices.Concat(cflags, []string{filepath.Join(dir[0], "libpython3.11-pic.a"), "-ldl", "-lm", "-lz", "-lexpat"})
	shared := slices.Concat(cflags, flags("--embed", "--ldflags"))
	renamed := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("cp", py, renamed).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, c := range []struct{ name, exe string }{
		{"static", testutil.Build(t, "gcc", src, static...)},
		{"shared", testutil.Build(t, "gcc", src, shared...)},
		{"renamed", renamed},
	} {
		t.Run(c.name, func(t *testing.T) {
			script := testutil.Testdata("python", "embed.py")
			tg := testutil.Start(t, c.exe, script)
			v := readyVals(t, tg.Ready)
			p := dumpJSON(t, "-p", strconv.Itoa(tg.PID))
			if p.Runtime == nil || p.Runtime.Name != "python" || p.Runtime.Version != v["version"] {
				t.Errorf("runtime %+v, want python %s", p.Runtime, v["version"])
			}
			var main jThread
			for _, th := range p.Threads {
				if th.TID == tidOf(t, v, "tid") {
					main = th
				}
			}
			want := []string{fmt.Sprintf("wait_here %s:%s", script, v["line"]), "<module> " + script}
			got := pyFrames(main)
			if len(got) != 2 || got[0] != want[0] || !strings.HasPrefix(got[1], want[1]+":") {
				t.Errorf("Python frames %q, want %q (the second at any line); warnings %q", got, want, p.Warnings)
			}
		})
	}
}

// TestPythonRecordRenamed: record finds the interpreter of Debian's
// python3.11 copied under another name (worker) and keeps its Python
// frames: hot.py's hot_a and hot_b are in the folded stacks.
func TestPythonRecordRenamed(t *testing.T) {
	py := testutil.Need(t, "/usr/bin/python3.11")
	renamed := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.Command("cp", py, renamed).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	tg := testutil.Start(t, renamed, testutil.Testdata("python", "hot.py"))
	out := filepath.Join(t.TempDir(), "p.folded")
	if _, errOut, code := runSS(t, "record", "-F", "99", "-d", "2s", "-o", out, strconv.Itoa(tg.PID)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := foldedShares(t, string(data), "hot_a", "hot_b"); got["hot_a"] == 0 || got["hot_b"] == 0 {
		t.Errorf("hot_a %d, hot_b %d samples: the Python frames of a python named worker were not recorded:\n%s", got["hot_a"], got["hot_b"], data)
	}
}

// TestPythonIdleVerdict: a Python program whose threads all wait to be
// woken (idle.py: workers on a queue.Queue, a Condition, an Event, a
// Semaphore) is at rest, as one whose threads wait on condition
// variables: the verdict says nothing is wrong, and its largest group is
// the queue's workers. Every CPython the machine has.
func TestPythonIdleVerdict(t *testing.T) {
	for _, py := range pythons() {
		t.Run(py.name, func(t *testing.T) {
			tg := testutil.Start(t, testutil.Need(t, py.path), testutil.Testdata("python", "idle.py"))
			p := diagJSON(t, "-p", strconv.Itoa(tg.PID))
			want := "nothing is wrong: no thread waits for a lock, no deadlock; the largest group: 4 threads "
			if !strings.HasPrefix(p.Verdict, want) || !strings.Contains(p.Verdict, "waiting for Python lock (queue.Queue)") {
				t.Errorf("verdict %q, want it to begin %q and name the queue", p.Verdict, want)
			}
		})
	}
}
