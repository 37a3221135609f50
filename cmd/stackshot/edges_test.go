//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// The wait-for graph's edges beyond mutexes and rwlocks, each against a
// target that prints which thread took what (testdata/targets/edges.c).

func buildEdges(t *testing.T) string {
	return testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "edges.c")}, "-O2", "-g", "-pthread")
}

func dumpText(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runSS(t, append([]string{"dump"}, args...)...)
	if code != 0 {
		t.Fatalf("stackshot dump %v: exit %d\n%s", args, code, errOut)
	}
	return out
}

func wantLine(t *testing.T, out, line string) {
	t.Helper()
	if !strings.Contains(out, line+"\n") {
		t.Errorf("no line\n%s\nin\n%s", line, out)
	}
}

// main holds pool_lock and joins "joined", which waits for pool_lock: a
// cycle through pthread_join, found as a deadlock.
func TestDeadlockThroughJoin(t *testing.T) {
	tg := testutil.Start(t, buildEdges(t), "join")
	v := readyVals(t, tg.Ready)
	main, joined := tidOf(t, v, "main"), tidOf(t, v, "joined")
	pool := addrOf(t, v, "pool_lock")
	if !testutil.WaitInSyscallNr(tg.PID, main, 202, 30*time.Second) {
		t.Fatalf("main did not block in futex (pthread_join)")
	}
	p := diagJSON(t, strconv.Itoa(tg.PID))
	wantWait(t, p, joined, "mutex", pool, main)
	mw := threadByTID(t, p, main).WaitingFor
	if mw == nil || mw.Kind != "join" || mw.OwnerTID == nil || *mw.OwnerTID != joined {
		t.Fatalf("main waits for %+v, want a join of %d", mw, joined)
	}
	if p.Deadlocks == nil || len(*p.Deadlocks) != 1 || fmt.Sprint((*p.Deadlocks)[0].TIDs) != fmt.Sprint([]int{main, joined}) {
		t.Fatalf("deadlocks %+v, want [%d %d]", p.Deadlocks, main, joined)
	}
	out := dumpText(t, strconv.Itoa(tg.PID))
	wantLine(t, out, fmt.Sprintf(`DEADLOCK: thread %d "edges" waits in pthread_join for thread %d "joined", which waits for mutex pool_lock (%s) held by thread %d "edges"`,
		main, joined, pool, main))
}

// "holder" holds flockfile(stdout) and waits for gate (held by main);
// "printer" blocks in printf: it waits for stdout's lock, held by
// "holder". No cycle.
func TestStdioLockOwner(t *testing.T) {
	bin := buildEdges(t)
	tg := testutil.Start(t, bin, "stdio")
	v := readyVals(t, tg.Ready)
	holder, printer := tidOf(t, v, "holder"), tidOf(t, v, "printer")
	p := diagJSON(t, strconv.Itoa(tg.PID))
	wantWait(t, p, holder, "mutex", addrOf(t, v, "gate"), tg.PID)
	pw := threadByTID(t, p, printer).WaitingFor
	if pw == nil || pw.Kind != "stdio-lock" || pw.OwnerTID == nil || *pw.OwnerTID != holder {
		t.Fatalf("printer waits for %+v, want a stdio-lock held by %d", pw, holder)
	}
	// The standard streams' locks are named by libc's .symtab (its
	// debug file, Debian's libc6-dbg).
	if want := libcStdoutName(); pw.Symbol != want {
		t.Errorf("printer's stdio lock is named %q, want %q", pw.Symbol, want)
	}
	wantDeadlocks(t, p, "")

	// The same with the gate held by the printer: a cycle.
	tg2 := testutil.Start(t, bin, "stdiocycle")
	v = readyVals(t, tg2.Ready)
	holder, printer = tidOf(t, v, "holder"), tidOf(t, v, "printer")
	p = diagJSON(t, strconv.Itoa(tg2.PID))
	wantWait(t, p, holder, "mutex", addrOf(t, v, "gate"), printer)
	if p.Deadlocks == nil || len(*p.Deadlocks) != 1 {
		t.Fatalf("deadlocks %+v, want one", p.Deadlocks)
	}
	lo, hi := min(holder, printer), max(holder, printer)
	if got := (*p.Deadlocks)[0].TIDs; fmt.Sprint(got) != fmt.Sprint([]int{lo, hi}) {
		t.Errorf("cycle %v, want [%d %d]", got, lo, hi)
	}
	out := dumpText(t, strconv.Itoa(tg2.PID))
	if libcStdoutName() != "" {
		wantLine(t, out, fmt.Sprintf(`    --- waiting for stdio lock of stdout (%s) held by thread %d "holder" ---`,
			*threadByTID(t, p, printer).WaitingFor.Address, holder))
	}
}

// A process-shared mutex held by a thread of a child process: the owner
// is named by its process, not called "not a thread of the process".
func TestProcessSharedOwner(t *testing.T) {
	tg := testutil.Start(t, buildEdges(t), "pshared")
	v := readyVals(t, tg.Ready)
	waiter, owner := tidOf(t, v, "waiter"), tidOf(t, v, "lockowner")
	p := diagJSON(t, strconv.Itoa(tg.PID))
	w := threadByTID(t, p, waiter).WaitingFor
	if w == nil || w.Kind != "mutex" || w.Address == nil || *w.Address != addrOf(t, v, "m") {
		t.Fatalf("waiter waits for %+v, want mutex %s", w, addrOf(t, v, "m"))
	}
	if w.OwnerTID != nil || w.OwnerPID != owner || w.OwnerComm != "lockowner" {
		t.Errorf("owner tid %v pid %d comm %q, want no thread here, process %d \"lockowner\"", w.OwnerTID, w.OwnerPID, w.OwnerComm, owner)
	}
	out := dumpText(t, strconv.Itoa(tg.PID))
	wantLine(t, out, fmt.Sprintf(`    --- waiting for mutex %s held by thread %d of process %d "lockowner" ---`, addrOf(t, v, "m"), owner, owner))
}

// Chains that are no cycle: "a" waits for lock_a, held by "b", which
// waits on a condition variable (no owner). No deadlock, and no owner
// for the condition variable.
func TestChainEndingInCondvar(t *testing.T) {
	tg := testutil.Start(t, buildEdges(t), "chain")
	v := readyVals(t, tg.Ready)
	a, b := tidOf(t, v, "a"), tidOf(t, v, "b")
	p := diagJSON(t, strconv.Itoa(tg.PID))
	wantWait(t, p, a, "mutex", addrOf(t, v, "lock_a"), b)
	wantWait(t, p, b, "condvar", addrOf(t, v, "cv"), 0)
	wantDeadlocks(t, p, "")
	if strings.Contains(p.Verdict, "deadlock (") {
		t.Errorf("verdict %q claims a deadlock", p.Verdict)
	}
}

// With --mode stop, the PI locker glibc parked after EDEADLK gives its
// mutex from the registers at the stop.
func TestDeadlockPIRegisters(t *testing.T) {
	tg := testutil.Start(t, buildLocks(t), "deadlock", "pi")
	v := readyVals(t, tg.Ready)
	a, b := tidOf(t, v, "locker-a"), tidOf(t, v, "locker-b")
	if !waitPISettled(tg.PID, a, b, 10*time.Second) {
		t.Fatalf("the PI deadlock did not settle")
	}
	p := diagJSON(t, "--mode", "stop", strconv.Itoa(tg.PID))
	m0, m1 := addrOf(t, v, "mx0"), addrOf(t, v, "mx1")
	wantWait(t, p, a, "pi-mutex", m1, b)
	wantWait(t, p, b, "pi-mutex", m0, a)
	wantDeadlocks(t, p, fmt.Sprint([]int{a, b}, []string{m1, m0}))
}

// libcStdoutName is what stdout's lock is named by: "stdout" when libc's
// debug file (with its .symtab) is installed, else nothing.
func libcStdoutName() string {
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "libc6-dbg").Output(); err == nil &&
		strings.Contains(string(out), "ok installed") {
		return "stdout"
	}
	return ""
}

// A lock inside a global array of structs is named by the array and the
// member's offset, as gdb says <accounts+152>.
func TestLockNamedBySymbolAndOffset(t *testing.T) {
	tg := testutil.Start(t, buildEdges(t), "accounts")
	v := readyVals(t, tg.Ready)
	debit, credit := tidOf(t, v, "debit"), tidOf(t, v, "credit")
	lock, base := addrOf(t, v, "lock"), addrOf(t, v, "accounts")
	l, _ := strconv.ParseUint(strings.TrimPrefix(lock, "0x"), 16, 64)
	b, _ := strconv.ParseUint(strings.TrimPrefix(base, "0x"), 16, 64)
	sym := fmt.Sprintf("accounts+%#x", l-b)
	p := diagJSON(t, strconv.Itoa(tg.PID))
	wantWait(t, p, credit, "mutex", lock, debit)
	if w := threadByTID(t, p, credit).WaitingFor; w.Symbol != sym {
		t.Errorf("lock named %q, want %q", w.Symbol, sym)
	}
	out := dumpText(t, strconv.Itoa(tg.PID))
	// (then what the owner does: it waits for a condition variable)
	if w := fmt.Sprintf(`    --- waiting for mutex %s (%s) held by thread %d "debit"`, sym, lock, debit); !strings.Contains(out, w) {
		t.Errorf("no line starting\n%s\nin\n%s", w, out)
	}
}

// The stdio lock's owner exited holding it and its TID now belongs to
// another thread (the target gives it by ns_last_pid): the owner recorded
// is a thread descriptor whose tid is 0, and no thread is named.
func TestStdioLockOwnerTIDReused(t *testing.T) {
	tg := testutil.Start(t, buildEdges(t), "reuse")
	if tg.Ready == "ready noreuse" {
		testutil.Skip(t, "the target could not have a TID reused (ns_last_pid needs root, and the pid must be free)")
	}
	v := readyVals(t, tg.Ready)
	holder, reuser, printer := tidOf(t, v, "holder"), tidOf(t, v, "reuser"), tidOf(t, v, "printer")
	if holder != reuser {
		t.Fatalf("holder %d, reuser %d: the TID was not reused", holder, reuser)
	}
	p := diagJSON(t, strconv.Itoa(tg.PID))
	w := threadByTID(t, p, printer).WaitingFor
	if w == nil || w.Kind != "stdio-lock" {
		t.Fatalf("printer waits for %+v, want a stdio-lock", w)
	}
	if w.OwnerTID != nil {
		t.Errorf("owner %d named for a lock whose owner exited (its TID reused by %q)", *w.OwnerTID, "reuser")
	}
	if w.Note != "the owner has exited" {
		t.Errorf("note %q, want \"the owner has exited\"", w.Note)
	}
}

// A plain mutex's owner exited holding it and its TID now belongs to
// "reuser", which waits for the same mutex, as "orphan" does: glibc
// records only the TID, so the reuser reads as the owner. That it waits
// for the mutex itself is what is provable (it locked it twice, or is
// not the owner): no owner is named, and no self-deadlock claimed.
func TestMutexOwnerTIDReusedByWaiter(t *testing.T) {
	tg := testutil.Start(t, buildEdges(t), "mutexreuse")
	if tg.Ready == "ready noreuse" {
		testutil.Skip(t, "the target could not have a TID reused (ns_last_pid needs root, and the pid must be free)")
	}
	v := readyVals(t, tg.Ready)
	holder, reuser, orphan := tidOf(t, v, "holder"), tidOf(t, v, "reuser"), tidOf(t, v, "orphan")
	if holder != reuser {
		t.Fatalf("holder %d, reuser %d: the TID was not reused", holder, reuser)
	}
	stale := addrOf(t, v, "stale")
	p := diagJSON(t, strconv.Itoa(tg.PID))
	for _, tid := range []int{reuser, orphan} {
		wantWait(t, p, tid, "mutex", stale, 0)
		if w := threadByTID(t, p, tid).WaitingFor; !strings.Contains(w.Note, "locked it twice, or") {
			t.Errorf("thread %d: note %q, want it to say the recorded owner waits for the mutex itself", tid, w.Note)
		}
	}
	wantDeadlocks(t, p, "")
}
