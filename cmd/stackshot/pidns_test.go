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

// Targets in a PID namespace of their own (a container): their locks
// record that namespace's thread ids, which the targets print; the
// kernel's NSpid lines say which of our threads each is. Owners must be
// our ids, and the cycle found.

type nsTarget struct {
	*testutil.Target
	pid  int         // the target (pid 1 in its namespace), our id
	host map[int]int // its threads: id there -> our id
}

// startInPIDNS runs bin args as pid 1 of a new PID namespace (with its own
// /proc, which the targets read) and maps its threads' ids.
func startInPIDNS(t *testing.T, bin string, args ...string) *nsTarget {
	t.Helper()
	unshare := testutil.Need(t, "unshare")
	if os.Geteuid() != 0 {
		testutil.Skip(t, "a new PID namespace needs root here")
	}
	tg := testutil.Start(t, unshare, append([]string{"--pid", "--fork", "--mount-proc", bin}, args...)...)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", tg.PID, tg.PID))
	f := strings.Fields(string(b))
	if err != nil || len(f) != 1 {
		t.Fatalf("unshare's child: %q %v", b, err)
	}
	pid, _ := strconv.Atoi(f[0])
	if !testutil.WaitSettled(pid, 60*time.Second) {
		t.Fatalf("target %d did not settle", pid)
	}
	host := map[int]int{}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				ids := strings.Fields(v)
				if len(ids) < 2 || ids[0] != e.Name() {
					t.Fatalf("thread %s: NSpid %q, want our id then the namespace's", e.Name(), v)
				}
				our, _ := strconv.Atoi(ids[0])
				their, _ := strconv.Atoi(ids[len(ids)-1])
				host[their] = our
			}
		}
	}
	if host[1] != pid {
		t.Fatalf("target %d is not pid 1 of its namespace: %v", pid, host)
	}
	return &nsTarget{Target: tg, pid: pid, host: host}
}

// tid is the thread the target printed as name, in our ids.
func (n *nsTarget) tid(t *testing.T, v map[string]string, name string) int {
	t.Helper()
	id := tidOf(t, v, name)
	h, ok := n.host[id]
	if !ok {
		t.Fatalf("%s=%d is no thread of the namespace (%v)", name, id, n.host)
	}
	if h == id {
		t.Fatalf("%s: id %d is the same in both namespaces: the test proves nothing", name, id)
	}
	return h
}

func TestPIDNamespaceMutexDeadlock(t *testing.T) {
	n := startInPIDNS(t, buildLocks(t), "deadlock", "normal")
	v := readyVals(t, n.Ready)
	a, b := n.tid(t, v, "locker-a"), n.tid(t, v, "locker-b")
	m0, m1 := addrOf(t, v, "mx0"), addrOf(t, v, "mx1")
	check := func(p dProc) {
		t.Helper()
		wantWait(t, p, a, "mutex", m1, b)
		wantWait(t, p, b, "mutex", m0, a)
		if a < b {
			wantDeadlocks(t, p, fmt.Sprint([]int{a, b}, []string{m1, m0}))
		} else {
			wantDeadlocks(t, p, fmt.Sprint([]int{b, a}, []string{m0, m1}))
		}
	}
	check(diagJSON(t, strconv.Itoa(n.pid)))
	// The same read in the sandboxed child (as for another user's process).
	out, errOut, code := runBinEnv(t, stackshotBin, []string{"STACKSHOT_SANDBOX=1"}, "dump", "--json", strconv.Itoa(n.pid))
	if code != 0 {
		t.Fatalf("sandboxed dump: exit %d\n%s", code, errOut)
	}
	var p dProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	check(p)
}

// A rwlock's writer, parked in read(2), is recorded by its id there.
func TestPIDNamespaceRWLockWriter(t *testing.T) {
	n := startInPIDNS(t, buildLocks(t), "rwlock")
	v := readyVals(t, n.Ready)
	writer := n.tid(t, v, "writer")
	p := diagJSON(t, strconv.Itoa(n.pid))
	for _, r := range []string{"reader-0", "reader-1", "reader-2"} {
		wantWait(t, p, n.tid(t, v, r), "rwlock", addrOf(t, v, "rw"), writer)
	}
	wantDeadlocks(t, p, "")
}

// "holder" holds stdout's lock (its struct pthread records its id there)
// and waits for gate, held by main (pid 1 there), which sleeps in read(2).
func TestPIDNamespaceStdioAndSleepingOwner(t *testing.T) {
	n := startInPIDNS(t, buildEdges(t), "stdio")
	v := readyVals(t, n.Ready)
	holder, printer := n.tid(t, v, "holder"), n.tid(t, v, "printer")
	p := diagJSON(t, strconv.Itoa(n.pid))
	wantWait(t, p, holder, "mutex", addrOf(t, v, "gate"), n.pid)
	pw := threadByTID(t, p, printer).WaitingFor
	if pw == nil || pw.Kind != "stdio-lock" || pw.OwnerTID == nil || *pw.OwnerTID != holder {
		t.Fatalf("printer waits for %+v, want a stdio-lock held by %d", pw, holder)
	}
	wantDeadlocks(t, p, "")
}

// A process-shared mutex held by another process of the namespace: its
// owner's id there is found among that namespace's tasks, and the
// process named by our id.
func TestPIDNamespaceProcessSharedOwner(t *testing.T) {
	n := startInPIDNS(t, buildEdges(t), "pshared")
	v := readyVals(t, n.Ready)
	waiter := n.tid(t, v, "waiter")
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", n.pid, n.pid))
	f := strings.Fields(string(b))
	if err != nil || len(f) != 1 {
		t.Fatalf("the target's child: %q %v", b, err)
	}
	owner, _ := strconv.Atoi(f[0])
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", owner))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			ids = strings.Fields(v)
		}
	}
	if len(ids) < 2 || ids[len(ids)-1] != v["lockowner"] {
		t.Fatalf("process %d: NSpid %v, want the lockowner=%s the target printed", owner, ids, v["lockowner"])
	}
	p := diagJSON(t, strconv.Itoa(n.pid))
	w := threadByTID(t, p, waiter).WaitingFor
	if w == nil || w.Kind != "mutex" || w.Address == nil || *w.Address != addrOf(t, v, "m") {
		t.Fatalf("waiter waits for %+v, want mutex %s", w, addrOf(t, v, "m"))
	}
	if w.OwnerTID != nil || w.OwnerPID != owner || w.OwnerComm != "lockowner" {
		t.Errorf("owner tid %v pid %d comm %q, want no thread here, process %d \"lockowner\"", w.OwnerTID, w.OwnerPID, w.OwnerComm, owner)
	}
}
