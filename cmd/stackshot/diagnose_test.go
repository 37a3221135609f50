//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// The diagnosis part of the JSON contract (testutil's reading).
type (
	dWait   = testutil.WaitingFor
	dThread = testutil.DumpThread
	dProc   = testutil.DumpProcess
)

func diagJSON(t *testing.T, args ...string) dProc {
	t.Helper()
	out, errOut, code := runSS(t, append([]string{"dump", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("stackshot %v: exit %d\n%s", args, code, errOut)
	}
	var p dProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	return p
}

// readyVals parses the target's "ready k=v ..." line.
func readyVals(t *testing.T, line string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, f := range strings.Fields(line)[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func tidOf(t *testing.T, v map[string]string, name string) int {
	t.Helper()
	n, err := strconv.Atoi(v[name])
	if err != nil {
		t.Fatalf("no tid for %s in %v", name, v)
	}
	return n
}

// addrOf normalizes a %p address as JSON writes addresses.
func addrOf(t *testing.T, v map[string]string, name string) string {
	t.Helper()
	a, err := strconv.ParseUint(strings.TrimPrefix(v[name], "0x"), 16, 64)
	if err != nil {
		t.Fatalf("no address for %s in %v", name, v)
	}
	return fmt.Sprintf("%#x", a)
}

func threadByTID(t *testing.T, p dProc, tid int) dThread {
	t.Helper()
	for _, th := range p.Threads {
		if th.TID == tid {
			return th
		}
	}
	t.Fatalf("thread %d not in the report", tid)
	return dThread{}
}

// wantWait checks what a thread waits for; owner 0 means unknown (null).
func wantWait(t *testing.T, p dProc, tid int, kind, addr string, owner int) {
	t.Helper()
	th := threadByTID(t, p, tid)
	w := th.WaitingFor
	if w == nil {
		t.Fatalf("thread %d %q: no waiting_for, want %s %s", tid, th.Name, kind, addr)
	}
	got := "<nil>"
	if w.Address != nil {
		got = *w.Address
	}
	if w.Kind != kind || got != addr {
		t.Errorf("thread %d %q waits for %s %s, want %s %s", tid, th.Name, w.Kind, got, kind, addr)
	}
	switch {
	case owner == 0 && w.OwnerTID != nil:
		t.Errorf("thread %d %q: owner %d named, want unknown (%s)", tid, th.Name, *w.OwnerTID, w.Note)
	case owner != 0 && (w.OwnerTID == nil || *w.OwnerTID != owner):
		t.Errorf("thread %d %q: owner %v, want %d (note %q)", tid, th.Name, w.OwnerTID, owner, w.Note)
	}
}

func wantDeadlocks(t *testing.T, p dProc, want string) {
	t.Helper()
	if p.Deadlocks == nil {
		t.Fatalf("no deadlocks array in the JSON")
	}
	var got []string
	for _, d := range *p.Deadlocks {
		var as []string
		for _, a := range d.Addresses {
			if a == nil {
				as = append(as, "unknown")
			} else {
				as = append(as, *a)
			}
		}
		got = append(got, fmt.Sprint(d.TIDs, as))
	}
	if g := strings.Join(got, "; "); g != want {
		t.Errorf("deadlocks %s, want %s", g, want)
	}
}

func buildLocks(t *testing.T) string {
	return testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "locks.c")}, "-O2", "-g", "-pthread")
}

// Two threads deadlock on two mutexes of each kind glibc has: both lock
// owners are read from the mutexes, the cycle is found, and the text
// starts with it.
func TestDeadlockMutexKinds(t *testing.T) {
	bin := buildLocks(t)
	for _, kind := range []string{"normal", "errorcheck", "recursive", "adaptive", "robust"} {
		t.Run(kind, func(t *testing.T) {
			tg := testutil.Start(t, bin, "deadlock", kind)
			v := readyVals(t, tg.Ready)
			a, b := tidOf(t, v, "locker-a"), tidOf(t, v, "locker-b")
			m0, m1 := addrOf(t, v, "mx0"), addrOf(t, v, "mx1")
			p := diagJSON(t, strconv.Itoa(tg.PID))
			wantWait(t, p, a, "mutex", m1, b)
			wantWait(t, p, b, "mutex", m0, a)
			wantDeadlocks(t, p, fmt.Sprint([]int{a, b}, []string{m1, m0}))

			out, _, code := runSS(t, "dump", strconv.Itoa(tg.PID))
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			lines := strings.Split(out, "\n")
			if len(lines) > 2 && strings.HasPrefix(lines[1], "  command line: ") {
				lines = lines[1:] // (the header's second line)
			}
			if !strings.HasPrefix(lines[1], "Verdict: a deadlock (threads ") {
				t.Errorf("second line %q, want the verdict", lines[1])
			}
			// mx is a static array of three mutexes: they are named so.
			want := fmt.Sprintf(`DEADLOCK: thread %d "locker-a" waits for mutex mx+0x28 (%s) held by thread %d "locker-b", which waits for mutex mx (%s) held by thread %d "locker-a"`,
				a, m1, b, m0, a)
			if lines[2] != want {
				t.Errorf("third line\n%q, want\n%q", lines[2], want)
			}
			wl := fmt.Sprintf(`    --- waiting for mutex mx+0x28 (%s) held by thread %d "locker-b" ---`, m1, b)
			if !strings.Contains(out, wl+"\n") {
				t.Errorf("no line %q in\n%s", wl, out)
			}
		})
	}
}

// A PI deadlock: one thread waits in FUTEX_LOCK_PI (its owner is in the
// futex word); the kernel refuses the other with EDEADLK and glibc parks it
// forever on a futex in its own frame, which is said as such.
func TestDeadlockPI(t *testing.T) {
	tg := testutil.Start(t, buildLocks(t), "deadlock", "pi")
	v := readyVals(t, tg.Ready)
	a, b := tidOf(t, v, "locker-a"), tidOf(t, v, "locker-b")
	m0, m1 := addrOf(t, v, "mx0"), addrOf(t, v, "mx1")
	// The state settles only once the kernel has refused one of them and
	// glibc has parked it: one thread in FUTEX_LOCK_PI, the other in a
	// FUTEX_WAIT_BITSET on its own stack.
	if !waitPISettled(tg.PID, a, b, 10*time.Second) {
		t.Fatalf("the PI deadlock did not settle (one thread in FUTEX_LOCK_PI, one parked)")
	}
	p := diagJSON(t, strconv.Itoa(tg.PID))
	ta, tb := threadByTID(t, p, a), threadByTID(t, p, b)
	if ta.WaitingFor == nil || tb.WaitingFor == nil {
		t.Fatalf("waiting_for missing: %+v %+v", ta.WaitingFor, tb.WaitingFor)
	}
	// Which one the kernel refused depends on who came second.
	blocked, parked, blockedWant, other := a, b, m1, a
	if tb.WaitingFor.OwnerTID != nil && tb.WaitingFor.Note == "" {
		blocked, parked, blockedWant = b, a, m0
	}
	other = parked
	wantWait(t, p, blocked, "pi-mutex", blockedWant, other)
	pw := threadByTID(t, p, parked).WaitingFor
	if pw.Kind != "pi-mutex" || !strings.Contains(pw.Note, "EDEADLK") {
		t.Errorf("parked thread %d: %+v, want a pi-mutex wait noting EDEADLK", parked, pw)
	}
	// Its mutex is found when a pointer to it is left in the lock call's
	// frame, else its owner is inferred: the one thread whose PI waits
	// lead back to it.
	if pw.OwnerTID == nil || *pw.OwnerTID != blocked {
		t.Fatalf("parked thread %d: owner %v, want %d", parked, pw.OwnerTID, blocked)
	}
	parkedWant := m1 // locker-a wants mx1, locker-b mx0
	if parked == b {
		parkedWant = m0
	}
	if pw.Address != nil && *pw.Address != parkedWant {
		t.Errorf("parked thread %d waits for %s, want %s", parked, *pw.Address, parkedWant)
	}
	if p.Deadlocks == nil || len(*p.Deadlocks) != 1 {
		t.Fatalf("deadlocks %v, want the one cycle", p.Deadlocks)
	}
	d := (*p.Deadlocks)[0]
	if fmt.Sprint(d.TIDs) != fmt.Sprint([]int{a, b}) {
		t.Errorf("cycle %v, want [%d %d]", d.TIDs, a, b)
	}
}

func TestDeadlockThreeThreadsAndSelf(t *testing.T) {
	bin := buildLocks(t)
	tg := testutil.Start(t, bin, "cycle3")
	v := readyVals(t, tg.Ready)
	r0, r1, r2 := tidOf(t, v, "ring-0"), tidOf(t, v, "ring-1"), tidOf(t, v, "ring-2")
	m := []string{addrOf(t, v, "mx0"), addrOf(t, v, "mx1"), addrOf(t, v, "mx2")}
	p := diagJSON(t, strconv.Itoa(tg.PID))
	wantWait(t, p, r0, "mutex", m[1], r1)
	wantWait(t, p, r1, "mutex", m[2], r2)
	wantWait(t, p, r2, "mutex", m[0], r0)
	wantDeadlocks(t, p, fmt.Sprint([]int{r0, r1, r2}, []string{m[1], m[2], m[0]}))

	tg2 := testutil.Start(t, bin, "self")
	v = readyVals(t, tg2.Ready)
	s := tidOf(t, v, "selfish")
	p = diagJSON(t, strconv.Itoa(tg2.PID))
	// A plain mutex locked twice reads as one whose owner exited and
	// whose TID the waiter was given (TestMutexOwnerTIDReusedByWaiter):
	// both are said, neither claimed.
	wantWait(t, p, s, "mutex", addrOf(t, v, "mx0"), 0)
	if w := threadByTID(t, p, s).WaitingFor; !strings.Contains(w.Note, fmt.Sprintf("thread %d, itself waits for this mutex: it locked it twice", s)) {
		t.Errorf("selfish: note %q, want it to say it waits for the mutex it is recorded to hold", w.Note)
	}
	wantDeadlocks(t, p, "")
}

// A writer holds a pthread rwlock; readers wait for it and name it.
func TestRWLockWriterHoldsReaders(t *testing.T) {
	tg := testutil.Start(t, buildLocks(t), "rwlock")
	v := readyVals(t, tg.Ready)
	w := tidOf(t, v, "writer")
	p := diagJSON(t, strconv.Itoa(tg.PID))
	for _, r := range []string{"reader-0", "reader-1", "reader-2"} {
		wantWait(t, p, tidOf(t, v, r), "rwlock", addrOf(t, v, "rw"), w)
	}
	wantWait(t, p, w, "semaphore", addrOf(t, v, "sem"), 0)
	wantDeadlocks(t, p, "")
	want := fmt.Sprintf(`no deadlock found; 3 threads ("reader-*") wait for rwlock rw (%s) held by thread %d "writer", itself waiting for semaphore sem (%s)`,
		addrOf(t, v, "rw"), w, addrOf(t, v, "sem"))
	if p.Verdict != want {
		t.Errorf("verdict %q, want %q", p.Verdict, want)
	}
}

// Condition variables and semaphores have no owner: say what is waited
// on, name nobody, find no deadlock.
func TestCondvarSemaphoreNoOwner(t *testing.T) {
	tg := testutil.Start(t, buildLocks(t), "condsem")
	v := readyVals(t, tg.Ready)
	p := diagJSON(t, strconv.Itoa(tg.PID))
	for _, n := range []string{"cwait-0", "cwait-1"} {
		wantWait(t, p, tidOf(t, v, n), "condvar", addrOf(t, v, "cv"), 0)
	}
	for _, n := range []string{"swait-0", "swait-1"} {
		wantWait(t, p, tidOf(t, v, n), "semaphore", addrOf(t, v, "sem"), 0)
	}
	wantDeadlocks(t, p, "")
	if p.Groups != nil {
		t.Errorf("groups without --group for %d threads", len(p.Threads))
	}
	// --group on a small process: waiters on the same call chain fold.
	g := diagJSON(t, "--group", strconv.Itoa(tg.PID))
	var groups []string
	for _, x := range g.Groups {
		groups = append(groups, fmt.Sprint(x.Count, x.Names))
	}
	if fmt.Sprint(groups) != fmt.Sprintf("[2 [cwait-*] 2 [swait-*] 1 [%s]]", threadByTID(t, p, tg.PID).Name) {
		t.Errorf("groups %v", groups)
	}
	out, _, _ := runSS(t, "dump", strconv.Itoa(tg.PID))
	// (a wait for what has no owner is said on the call's line; the two
	// cwait threads wait alike, on one condition variable: one line)
	want := fmt.Sprintf(": waiting for condition variable cv (%s) ---\n", addrOf(t, v, "cv"))
	if !strings.Contains(out, want) {
		t.Errorf("no line %q in\n%s", want, out)
	}
}

// Hostile and stale lock memory: an owner that exited, a mutex whose kind
// and owner were overwritten with junk, a mutex in unmapped memory, an
// owner field rewritten while it is read, a futex on a plain int. None may
// name a wrong owner; the dump succeeds.
func TestLockBadInput(t *testing.T) {
	bin := buildLocks(t)
	for _, mode := range []string{"exited", "garbage", "unmapped", "flip"} {
		t.Run(mode, func(t *testing.T) {
			tg := testutil.Start(t, bin, mode)
			v := readyVals(t, tg.Ready)
			p := diagJSON(t, strconv.Itoa(tg.PID))
			o := threadByTID(t, p, tidOf(t, v, "orphan"))
			if o.WaitingFor == nil || o.WaitingFor.Kind != "mutex" {
				t.Fatalf("orphan waits for %+v, want a mutex", o.WaitingFor)
			}
			if w := o.WaitingFor; w.OwnerTID != nil {
				// flip: the owner field alternates between the real
				// owner and junk; only the real one may ever be named.
				if mode != "flip" || *w.OwnerTID != tidOf(t, v, "holder") {
					t.Errorf("owner %d named for a %s mutex", *w.OwnerTID, mode)
				}
			}
			wantDeadlocks(t, p, "")
		})
	}
	t.Run("rawint", func(t *testing.T) {
		tg := testutil.Start(t, bin, "rawint")
		v := readyVals(t, tg.Ready)
		p := diagJSON(t, strconv.Itoa(tg.PID))
		if w := threadByTID(t, p, tidOf(t, v, "rawint")).WaitingFor; w != nil {
			t.Errorf("a raw futex on an int is called %+v", w)
		}
	})
}

// C++: std::mutex deadlock, std::shared_mutex held for writing.
func TestCxxStdMutexDeadlock(t *testing.T) {
	testutil.Need(t, "g++")
	bin := testutil.Build(t, "g++", []string{testutil.Testdata("targets", "cxxlocks.cc")}, "-std=c++20", "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin)
	v := readyVals(t, tg.Ready)
	a, b := tidOf(t, v, "cxx-a"), tidOf(t, v, "cxx-b")
	m0, m1 := addrOf(t, v, "m0"), addrOf(t, v, "m1")
	p := diagJSON(t, strconv.Itoa(tg.PID))
	wantWait(t, p, a, "mutex", m1, b)
	wantWait(t, p, b, "mutex", m0, a)
	wantWait(t, p, tidOf(t, v, "cxx-reader"), "rwlock", addrOf(t, v, "sm"), tidOf(t, v, "cxx-writer"))
	wantDeadlocks(t, p, fmt.Sprint([]int{a, b}, []string{m1, m0}))
}

// Rust's std Mutex records no owner: what is waited on is said, the owner
// is unknown and the text says so.
func TestRustMutexOwnerUnknown(t *testing.T) {
	testutil.Need(t, "rustc")
	bin := testutil.Build(t, "rustc", []string{testutil.Testdata("targets", "rustlock.rs")}, "-O", "-g")
	tg := testutil.Start(t, bin)
	v := readyVals(t, tg.Ready)
	p := diagJSON(t, strconv.Itoa(tg.PID))
	w := threadByTID(t, p, tidOf(t, v, "rust-waiter")).WaitingFor
	if w == nil || w.Kind != "rust-mutex" || w.OwnerTID != nil || w.Address == nil {
		t.Fatalf("rust-waiter waits for %+v, want a rust-mutex with no owner", w)
	}
	out, _, _ := runSS(t, "dump", strconv.Itoa(tg.PID))
	want := fmt.Sprintf("    --- waiting for Rust std Mutex %s (owner unknown: Rust's std Mutex does not record its owner) ---\n", *w.Address)
	if !strings.Contains(out, want) {
		t.Errorf("no line %q in\n%s", want, out)
	}
}

// A pool of 64 idle workers (plus main: past 64 threads) is grouped
// without asking; threads stay complete in JSON; --no-group turns it off.
func TestGroupIdlePool(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "64")
	pid := strconv.Itoa(tg.PID)
	p := diagJSON(t, pid)
	if len(p.Threads) != 65 {
		t.Fatalf("%d threads in JSON, want 65", len(p.Threads))
	}
	if len(p.Groups) != 2 {
		t.Fatalf("%d groups, want 2 (workers, main)", len(p.Groups))
	}
	g := p.Groups[0]
	if g.Count != 64 || len(g.TIDs) != 64 || fmt.Sprint(g.Names) != "[w-*]" {
		t.Errorf("first group: count %d, %d tids, names %v; want 64 workers named w-*", g.Count, len(g.TIDs), g.Names)
	}
	var fns []string
	for _, f := range g.Frames {
		if f.Kind == "user" {
			fns = append(fns, f.Fn())
		}
	}
	if s := strings.Join(fns, " "); !strings.Contains(s, "work_b work_a start") {
		t.Errorf("group frames %s, want work_b <- work_a <- start", s)
	}
	if p.Groups[1].Count != 1 || p.Groups[1].TIDs[0] != tg.PID {
		t.Errorf("second group %+v, want main alone", p.Groups[1])
	}
	out, _, _ := runSS(t, "dump", pid)
	if strings.Count(out, "\nThread ") != 1 || !strings.Contains(out, "\n64 threads \"w-*\" (state S, in futex): threads ") {
		t.Errorf("text not grouped:\n%s", out)
	}
	// Nobody holds anything: nothing is wrong, and the largest group is
	// the 64 workers.
	if want := "Verdict: nothing is wrong: no thread waits for a lock, no deadlock; the largest group: 64 threads (\"w-*\") waiting for condition variable in work_b\n"; !strings.Contains(out, want) {
		t.Errorf("verdict missing %q:\n%s", want, out)
	}
	if p := diagJSON(t, "--no-group", pid); p.Groups != nil {
		t.Errorf("--no-group still has %d groups", len(p.Groups))
	}
	out, _, _ = runSS(t, "dump", "--no-group", pid)
	if n := strings.Count(out, "\nThread "); n != 65 {
		t.Errorf("--no-group text shows %d threads, want 65", n)
	}
}

// Snapshots over time: blocked threads are stuck, spinning ones spin.
func TestProgressStuckSpinning(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	idle := testutil.Start(t, bin, "3")
	p := diagJSON(t, "--interval", "100ms", "--count", "3", strconv.Itoa(idle.PID))
	if p.ProgressSummary == nil || p.ProgressSummary.Snapshots != 3 || p.ProgressSummary.Stuck != 4 {
		t.Fatalf("summary %+v, want 3 snapshots, all 4 threads stuck", p.ProgressSummary)
	}
	for _, th := range p.Threads {
		if th.Progress != "stuck" || th.SameStackS == nil || *th.SameStackS <= 0 {
			t.Errorf("thread %d %q: %s %v, want stuck for some time", th.TID, th.Name, th.Progress, th.SameStackS)
		}
	}
	// Stopped at every snapshot, they gain a little CPU time from the
	// stops alone: still stuck, not spinning.
	p = diagJSON(t, "--mode", "stop", "--interval", "100ms", "--count", "3", strconv.Itoa(idle.PID))
	if p.ProgressSummary == nil || p.ProgressSummary.Stuck != 4 {
		t.Errorf("--mode stop: summary %+v, want all 4 threads stuck", p.ProgressSummary)
	}
	for _, th := range p.Threads {
		if th.Capture != "ptrace" || th.Progress != "stuck" {
			t.Errorf("--mode stop: thread %d %q captured %s: %s, want ptrace and stuck", th.TID, th.Name, th.Capture, th.Progress)
		}
	}
	spin := testutil.Start(t, bin, "2", "spin")
	p = diagJSON(t, "--interval", "100ms", "--count", "3", strconv.Itoa(spin.PID))
	n := 0
	for _, th := range p.Threads {
		if strings.HasPrefix(th.Name, "w-") {
			n++
			if th.Progress != "spinning" {
				t.Errorf("thread %d %q: %s, want spinning", th.TID, th.Name, th.Progress)
			}
		}
	}
	if n != 2 || p.ProgressSummary.Spinning != 2 {
		t.Errorf("%d workers, summary %+v; want 2 spinning", n, p.ProgressSummary)
	}
	out, _, _ := runSS(t, "dump", "--interval", "100ms", "--count", "2", strconv.Itoa(idle.PID))
	if !strings.Contains(out, "(state S, in read, nostop): [stuck 0.1s]") && !strings.Contains(out, "): [stuck 0.") {
		t.Errorf("no [stuck] mark:\n%s", out)
	}
}

func TestDiagnoseFlagsBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"dump", "--count", "0", "1"},
		{"dump", "--count", "3", "--interval", "0s", "1"},
		{"dump", "--group", "--no-group", "1"},
	} {
		_, errOut, code := runSS(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "stackshot: ") {
			t.Errorf("%v: exit %d, stderr %q; want usage error (2)", args, code, errOut)
		}
	}
}

// waitPISettled waits until one of the two threads waits in FUTEX_LOCK_PI
// and the other in FUTEX_WAIT_BITSET (glibc's park after EDEADLK).
func waitPISettled(pid, a, b int, d time.Duration) bool {
	op := func(tid int) int64 {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
		f := strings.Fields(string(raw))
		if err != nil || len(f) < 3 || f[0] != "202" {
			return -1
		}
		v, _ := strconv.ParseInt(strings.TrimPrefix(f[2], "0x"), 16, 64)
		return v & 0x7f // without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME
	}
	const lockPI, waitBitset = 6, 9
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		oa, ob := op(a), op(b)
		if (oa == lockPI && ob == waitBitset) || (oa == waitBitset && ob == lockPI) {
			return true
		}
	}
	return false
}
