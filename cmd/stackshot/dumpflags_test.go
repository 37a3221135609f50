//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// dump -o expands %p, %t and %h as record's and capture's -o do.
func TestDumpOutputPlaceholders(t *testing.T) {
	a := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	b := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	dir := t.TempDir()
	host, _ := os.Hostname()
	before := time.Now().UTC().Truncate(time.Second)
	if _, errOut, code := runSS(t, "dump", "--json", "-o", filepath.Join(dir, "d-%p-%h-%t-100%%.json"), fmt.Sprint(a.PID), fmt.Sprint(b.PID)); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	after := time.Now().UTC()
	ents, _ := os.ReadDir(dir)
	prefix := fmt.Sprintf("d-%d+%d-%s-", a.PID, b.PID, host)
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), prefix) || !strings.HasSuffix(ents[0].Name(), "-100%.json") {
		t.Fatalf("wrote %v, want one file %s<time>-100%%.json", ents, prefix)
	}
	stamp := strings.TrimSuffix(strings.TrimPrefix(ents[0].Name(), prefix), "-100%.json")
	at, err := time.Parse("20060102T150405Z", stamp)
	if err != nil || at.Before(before) || at.After(after) {
		t.Errorf("time %q (%v), want one between %v and %v", stamp, err, before, after)
	}
	var procs []jProc
	raw, _ := os.ReadFile(filepath.Join(dir, ents[0].Name()))
	if err := json.Unmarshal(raw, &procs); err != nil || len(procs) != 2 || procs[0].PID != a.PID || procs[1].PID != b.PID {
		t.Errorf("the file holds %d processes (%v), want %d and %d", len(procs), err, a.PID, b.PID)
	}
}
