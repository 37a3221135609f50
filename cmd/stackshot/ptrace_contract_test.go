package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// --stack-bytes bounds what a dump reads of each stack: the unwinder does
// not read on past the copy through live memory.
func TestDumpStackBytesBoundsUnwind(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	for _, mode := range []string{"auto", "stop"} {
		full := threadByName(t, dumpJSON(t, "--mode", mode, fmt.Sprint(tg.PID)), "reader")
		if f := userFuncs(full); len(f) == 0 || !strings.HasPrefix(strings.TrimLeft(f[len(f)-1], "_"), "clone") {
			t.Fatalf("mode %s: the full stack does not reach clone: %v", mode, f)
		}
		cut := threadByName(t, dumpJSON(t, "--mode", mode, "--stack-bytes", "64", fmt.Sprint(tg.PID)), "reader")
		f := userFuncs(cut)
		if len(f) == 0 || hasChain(f, []string{"start_thread"}) || cut.Stop != "stack copy too short" {
			t.Errorf("mode %s: with 64 stack bytes the walk went to %v (stop %q), want it cut short by the copy", mode, f, cut.Stop)
		}
	}
}

// A kernel thread is in no system call: kthreadd is not "in read".
func TestDumpKernelThreadNoSyscall(t *testing.T) {
	if _, err := os.ReadFile("/proc/2/task/2/syscall"); err != nil {
		testutil.Skip(t, fmt.Sprintf("/proc/2/task/2/syscall is not readable here (%v)", err))
	}
	p := dumpJSON(t, "2")
	if len(p.Threads) != 1 || p.Threads[0].Syscall != nil {
		t.Errorf("kthreadd: %d threads, syscall %+v", len(p.Threads), p.Threads[0].Syscall)
	}
	out, errOut, code := runSS(t, "dump", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, "in read") || strings.Contains(out, "--- read(") {
		t.Errorf("kthreadd shown in a system call:\n%s", out)
	}
}
