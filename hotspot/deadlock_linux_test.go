//go:build linux

package hotspot_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/diagnose"
	"stackshot/internal/testutil"
	"stackshot/live"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
	"stackshot/unwind"
)

// jlock is what jstack says a thread waits for: the object and its class,
// and the thread that holds it.
type jlock struct {
	obj    uint64
	class  string
	holder string
}

func (l jlock) String() string { return fmt.Sprintf("%#x (%s) held by %q", l.obj, l.class, l.holder) }

var (
	jstackWait = regexp.MustCompile(`^\s*- (?:waiting to lock|parking to wait for) +<0x([0-9a-f]+)> \(a ([^)]+)\)`)
	jstackHeld = regexp.MustCompile(`^\s*- (?:locked )?<0x([0-9a-f]+)> \(a ([^)]+)\)`)
)

// jstackLocks runs jstack -l on pid: for each JavaThread that waits for a
// monitor or a j.u.c lock, that lock and the thread jstack says holds it
// (the one listing it as locked, or among its ownable synchronizers).
func jstackLocks(t *testing.T, pid int) map[string]jlock {
	t.Helper()
	out, err := exec.Command(testutil.Need(t, "jstack"), "-l", strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		t.Fatalf("jstack: %v\n%s", err, out)
	}
	waits := map[string]jlock{}
	holders := map[uint64]string{}
	cur := ""
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Found ") {
			break // (the deadlock report repeats the stacks)
		}
		if strings.HasPrefix(l, "\"") {
			cur = ""
			if end := strings.Index(l[1:], "\""); end >= 0 && strings.HasPrefix(l[end+2:], " #") {
				cur = l[1 : end+1]
			}
			continue
		}
		if cur == "" {
			continue
		}
		if m := jstackWait.FindStringSubmatch(l); m != nil {
			a, _ := strconv.ParseUint(m[1], 16, 64)
			waits[cur] = jlock{obj: a, class: m[2]}
		} else if m := jstackHeld.FindStringSubmatch(l); m != nil {
			a, _ := strconv.ParseUint(m[1], 16, 64)
			holders[a] = cur
		}
	}
	for n, w := range waits {
		w.holder = holders[w.obj]
		waits[n] = w
	}
	return waits
}

// Java threads deadlocked on synchronized blocks (ABBA, a three-thread
// ring) and on ReentrantLocks, and one blocked on a monitor a sleeping
// thread holds: every wait names the object, its class and its holder as
// jstack does, and the deadlocks are exactly the three cycles.
func TestJavaMonitorsAndDeadlocks(t *testing.T) {
	tg := startDeadlocks(t)
	p := dump(t, tg.PID)
	diagnose.Diagnose(p, ptrace.MemReader{PID: tg.PID}, procmaps.TaskSet(tg.PID))
	checkDeadlocks(t, p, jstackLocks(t, tg.PID))
}

// The same, read by a sandboxed child (as for another user's JVM): the
// child reads the JVM, and its Java names, waits, deadlocks and runtime
// reach the report.
func TestJavaDeadlocksSandboxed(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	t.Setenv("STACKSHOT_SANDBOX", "1")
	tg := startDeadlocks(t)
	s := live.New(symtab.New(symtab.Options{}), live.Options{Capture: ptrace.Options{Kernel: true},
		Resolve: resolve.Options{MaxFrames: unwind.DefaultMaxFrames, Live: true}, Timeout: jvmReady,
		Goroutines: true, Started: time.Now(), Say: func(msg string) { t.Log(msg) }})
	defer s.Close()
	procs, failed, err := s.Dump([]int{tg.PID})
	if err != nil || failed != 0 || len(procs) != 1 {
		t.Fatalf("Dump: %d reports, %d failed, %v", len(procs), failed, err)
	}
	if s.Sandbox(tg.PID) == nil {
		t.Fatalf("no sandboxed child for process %d", tg.PID)
	}
	p := procs[0]
	if p.Runtime == nil || p.Runtime.Name != "java" {
		t.Errorf("runtime %+v, want java", p.Runtime)
	}
	checkDeadlocks(t, p, jstackLocks(t, tg.PID))
}

// startDeadlocks starts testdata/hotspot/Deadlocks.java.
func startDeadlocks(t *testing.T) *testutil.Target {
	t.Helper()
	testutil.Need(t, "javac")
	testutil.Need(t, "jar")
	java := testutil.Need(t, "java")
	jar := testutil.Artifact(t, "deadlocks.jar", testutil.Testdata("hotspot"),
		[]string{"javac", "-d", "$DIR/classes", "$SRC/Deadlocks.java"},
		[]string{"jar", "cf", "$OUT", "-C", "$DIR/classes", "."})
	return testutil.StartWithin(t, jvmReady, java, "-cp", jar, "Deadlocks")
}

// checkDeadlocks compares p's Java waits and deadlocks with jstack's.
func checkDeadlocks(t *testing.T, p *report.Process, want map[string]jlock) {
	t.Helper()

	names := map[int]string{}
	for i := range p.Threads {
		names[p.Threads[i].TID] = p.Threads[i].JavaName
	}
	got := map[string]jlock{}
	for i := range p.Threads {
		th := &p.Threads[i]
		w := th.WaitingFor
		if w == nil || (w.Kind != report.WaitMonitor && w.Kind != report.WaitJUCLock) {
			continue
		}
		l := jlock{obj: w.Address, class: w.Class}
		if w.OwnerTID != nil {
			l.holder = names[*w.OwnerTID]
		}
		got[th.JavaName] = l
	}
	for _, n := range []string{"abba-1", "abba-2", "ring-0", "ring-1", "ring-2", "juc-1", "juc-2", "enterer"} {
		if want[n] == (jlock{}) || want[n].holder == "" {
			t.Errorf("jstack: %q waits for %v", n, want[n])
		}
		if got[n] != want[n] {
			t.Errorf("%q waits for %v, want %v (jstack)", n, got[n], want[n])
		}
	}
	if want["enterer"].holder != "holder" {
		t.Errorf("jstack: enterer waits for %v, want a lock holder holds", want["enterer"])
	}
	var cycles []string
	for _, d := range p.Deadlocks {
		var c []string
		for _, tid := range d.TIDs {
			c = append(c, names[tid])
		}
		sort.Strings(c)
		cycles = append(cycles, strings.Join(c, " "))
	}
	sort.Strings(cycles)
	if w := []string{"abba-1 abba-2", "juc-1 juc-2", "ring-0 ring-1 ring-2"}; fmt.Sprint(cycles) != fmt.Sprint(w) {
		t.Errorf("deadlocks %q, want %q", cycles, w)
	}
}
