//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// report of a core says what a live dump says: lock owners, deadlocks and
// the verdict from the lock words the core holds; the signal that ended
// the process; no capture time when the core records none.

func reportDiagJSON(t *testing.T, core string) (dProc, string) {
	t.Helper()
	out, errOut, code := runSS(t, "report", "--json", core)
	if code != 0 {
		t.Fatalf("report %s: exit %d\n%s", core, code, errOut)
	}
	var p dProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	return p, out
}

// gcore of two threads deadlocked on two mutexes: the report finds the
// same owners, the same cycle and the same verdict as the live dump.
func TestReportGcoreDeadlock(t *testing.T) {
	testutil.Need(t, "gcore")
	tg := testutil.Start(t, buildLocks(t), "deadlock", "normal")
	v := readyVals(t, tg.Ready)
	a, b := tidOf(t, v, "locker-a"), tidOf(t, v, "locker-b")
	m0, m1 := addrOf(t, v, "mx0"), addrOf(t, v, "mx1")
	live := diagJSON(t, strconv.Itoa(tg.PID))
	prefix := filepath.Join(t.TempDir(), "g")
	if out, err := exec.Command("gcore", "-o", prefix, strconv.Itoa(tg.PID)).CombinedOutput(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, out)
	}
	tg.Stop()
	core := fmt.Sprintf("%s.%d", prefix, tg.PID)
	p, raw := reportDiagJSON(t, core)
	wantWait(t, p, a, "mutex", m1, b)
	wantWait(t, p, b, "mutex", m0, a)
	wantDeadlocks(t, p, fmt.Sprint([]int{a, b}, []string{m1, m0}))
	// Thread names differ (a core has none: its threads are called by
	// the process's name), the finding does not.
	if want := strings.NewReplacer(`"locker-a"`, `"locks"`, `"locker-b"`, `"locks"`).Replace(live.Verdict); p.Verdict != want {
		t.Errorf("core's verdict %q, live %q", p.Verdict, want)
	}
	if !strings.Contains(raw, `"time": null`) {
		t.Errorf("a gcore core has no capture time, want \"time\": null")
	}
	if strings.Contains(raw, `"signal"`) {
		t.Errorf("gcore's core of a living process names a fatal signal")
	}
}

// stackshot's own core holds the stacks only: the report says which
// answers it lacks and names no owner; with --core-memory writable it
// finds them.
func TestReportStackshotCoreLocks(t *testing.T) {
	bin := buildLocks(t)
	tg := testutil.Start(t, bin, "deadlock", "normal")
	v := readyVals(t, tg.Ready)
	a, b := tidOf(t, v, "locker-a"), tidOf(t, v, "locker-b")
	p, _ := reportDiagJSON(t, captureCore(t, tg))
	wantWait(t, p, a, "mutex", addrOf(t, v, "mx1"), 0)
	found := false
	for _, w := range p.Warnings {
		found = found || strings.Contains(w, "lock owners not known for 2 thread(s)")
	}
	if !found {
		t.Errorf("no warning on the lock owners a stacks-only core lacks: %q", p.Warnings)
	}
	wantDeadlocks(t, p, "")

	tg2 := testutil.Start(t, bin, "deadlock", "normal")
	v = readyVals(t, tg2.Ready)
	a, b = tidOf(t, v, "locker-a"), tidOf(t, v, "locker-b")
	p, _ = reportDiagJSON(t, captureCore(t, tg2, "--core-memory", "writable"))
	m0, m1 := addrOf(t, v, "mx0"), addrOf(t, v, "mx1")
	wantWait(t, p, a, "mutex", m1, b)
	wantDeadlocks(t, p, fmt.Sprint([]int{a, b}, []string{m1, m0}))
}

// The kernel's core of a program that called abort(): the signal is
// named, in JSON and as gdb says it.
func TestReportKernelCoreSignal(t *testing.T) {
	path, _ := abortedCore(t)
	_, raw := reportDiagJSON(t, path)
	if !strings.Contains(raw, `"signal": "SIGABRT"`) {
		t.Errorf("no \"signal\": \"SIGABRT\" in\n%.600s", raw)
	}
	out, errOut, code := runSS(t, "report", path)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	if lines := strings.SplitN(out, "\n", 3); len(lines) < 2 || lines[1] != "terminated with signal SIGABRT" {
		t.Errorf("second line %q, want \"terminated with signal SIGABRT\"", lines[1])
	}
}
