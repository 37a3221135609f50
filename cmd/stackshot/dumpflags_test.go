//go:build linux

package main

import (
	"fmt"
	"testing"

	"stackshot/internal/testutil"
)

// --interval without --count is bad usage (it used to take one snapshot
// without a word), said in one line, before any process is read.
func TestDumpIntervalNeedsCount(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	out, errOut, code := runSS(t, "dump", "--interval", "1s", fmt.Sprint(tg.PID))
	want := "stackshot: --interval needs --count N (it is the time between N snapshots; e.g. '--interval 1s --count 5')\n"
	if code != 2 || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errOut, want)
	}
	// With --count, even --count 1, it is a series.
	if _, errOut, code := runSS(t, "dump", "--interval", "10ms", "--count", "1", fmt.Sprint(tg.PID)); code != 0 {
		t.Errorf("--interval 10ms --count 1: exit %d: %s", code, errOut)
	}
}
