//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"stackshot/internal/testutil"
)

var (
	hooksOnce sync.Once
	hooksBin  string
	hooksErr  error
)

// hookedBin is stackshot built with its test hooks (-tags
// stackshot_testhooks), beside the command under test.
func hookedBin(t *testing.T) string {
	t.Helper()
	hooksOnce.Do(func() {
		hooksBin = filepath.Join(filepath.Dir(stackshotBin), "stackshot-hooks")
		out, err := exec.Command("go", "build", "-tags", "stackshot_testhooks", "-o", hooksBin, ".").CombinedOutput()
		if err != nil {
			hooksErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if hooksErr != nil {
		t.Fatalf("building stackshot with test hooks: %v", hooksErr)
	}
	return hooksBin
}

// tidByName finds the thread of pid named name.
func tidByName(t *testing.T, pid int, name string) int {
	t.Helper()
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, e.Name()))
		if strings.TrimSpace(string(b)) == name {
			var tid int
			fmt.Sscan(e.Name(), &tid)
			return tid
		}
	}
	t.Fatalf("no thread %q in process %d", name, pid)
	return 0
}

// The unwinder panics (test hook) on one thread of the first of two
// processes: that thread reports the panic as its error, and every other
// thread of both processes is dumped as usual.
func TestDumpPanicOneThread(t *testing.T) {
	bin := hookedBin(t)
	a := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	b := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	victim := tidByName(t, a.PID, "condwait")
	for _, format := range []string{"json", "text"} {
		cmd := exec.Command(bin, "dump", "--format", format, fmt.Sprint(a.PID), fmt.Sprint(b.PID))
		cmd.Env = append(os.Environ(), fmt.Sprintf("STACKSHOT_TEST_PANIC_TID=%d", victim))
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("dump --format %s: %v\n%s", format, err, se.String())
		}
		if format == "text" {
			out := so.String()
			for _, want := range []string{
				fmt.Sprintf("Process %d (", a.PID), fmt.Sprintf("Process %d (", b.PID),
				fmt.Sprintf("internal error while resolving thread %d: test hook: unwinder panic in thread %d", victim, victim),
			} {
				if !strings.Contains(out, want) {
					t.Errorf("text lacks %q:\n%s", want, out)
				}
			}
			continue
		}
		var procs []jProc
		if err := json.Unmarshal([]byte(so.String()), &procs); err != nil || len(procs) != 2 {
			t.Fatalf("want two processes: %v\n%s", err, so.String())
		}
		checkBlocked(t, procs[1], b.PID)
		pa := procs[0]
		if len(pa.Threads) != 7 {
			t.Fatalf("process %d: %d threads, want 7", a.PID, len(pa.Threads))
		}
		for _, th := range pa.Threads {
			if th.TID == victim {
				if th.Error == nil || !strings.Contains(*th.Error, "test hook: unwinder panic") {
					t.Errorf("thread %d: error %v, want the contained panic", th.TID, th.Error)
				}
				continue
			}
			if th.Error != nil || len(userFuncs(th)) == 0 {
				t.Errorf("thread %d %q: error %v, %d user frames", th.TID, th.Name, th.Error, len(userFuncs(th)))
			}
		}
		assertThreadChain(t, threadByName(t, pa, "reader"), "reader_c", "reader_b", "reader_a")
	}
}
