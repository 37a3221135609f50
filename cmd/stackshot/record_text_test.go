//go:build linux

package main

// What record says on stderr, for cron and fleets: one line by default,
// an empty profile and a spooled one as warnings -q keeps.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// TestRecordSaysWhatCronMustKnow records an idle process (every thread
// blocked: nothing runs on a CPU) and a busy one, quiet and not.
func TestRecordSaysWhatCronMustKnow(t *testing.T) {
	idle := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags)) // (no "spin": all blocked)
	busy := testutil.Start(t, buildHot(t))
	dir := t.TempDir()

	// Idle, -q: an empty profile, exit 0, and a warning that points to --idle.
	out := filepath.Join(dir, "idle.folded")
	_, errOut, code := runSS(t, "record", "-q", "-d", "1s", "-o", out, fmt.Sprint(idle.PID))
	if b, err := os.ReadFile(out); code != 0 || err != nil || len(b) != 0 {
		t.Fatalf("idle, -q: exit %d, profile %q (%v), want exit 0 and an empty profile:\n%s", code, b, err, errOut)
	}
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 ||
		!strings.HasPrefix(lines[0], "stackshot: warning: nothing ran on a CPU in ") || !strings.Contains(lines[0], "--idle") {
		t.Errorf("idle, -q: want one warning that nothing ran on a CPU, pointing to --idle:\n%s", errOut)
	}
	// With --idle the same process's waits are the profile: no warning.
	_, errOut, code = runSS(t, "record", "-q", "--idle", "-d", "1s", "-o", out, fmt.Sprint(idle.PID))
	if b, _ := os.ReadFile(out); code != 0 || errOut != "" || !strings.Contains(string(b), "reader_c") {
		t.Errorf("idle, --idle -q: exit %d, stderr %q, want the blocked chains and nothing said:\n%s", code, errOut, b)
	}

	// Busy: -q says nothing; the default says one line; -v how it sampled.
	_, errOut, code = runSS(t, "record", "-q", "-d", "1s", "-o", out, fmt.Sprint(busy.PID))
	if code != 0 || errOut != "" {
		t.Errorf("busy, -q: exit %d, want nothing on stderr:\n%s", code, errOut)
	}
	_, errOut, code = runSS(t, "record", "-d", "1s", "-o", out, fmt.Sprint(busy.PID))
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code != 0 || len(lines) != 1 ||
		!strings.Contains(lines[0], " on-CPU samples of ") || !strings.HasSuffix(lines[0], "written to "+out) {
		t.Errorf("busy: exit %d, want the one summary line:\n%s", code, errOut)
	}
	_, errOut, code = runSS(t, "record", "-v", "-d", "1s", "-o", out, fmt.Sprint(busy.PID))
	if code != 0 || !strings.Contains(errOut, "stackshot: samples read: ") || !strings.Contains(errOut, "left out (--idle keeps them)") {
		t.Errorf("busy, -v: exit %d, want how it sampled and what it left out:\n%s", code, errOut)
	}
}

// TestRecordQuietSaysSpooled: a profile the collector did not take is
// kept in the spool, and -q still says so (exit 0, as the contract says).
func TestRecordQuietSaysSpooled(t *testing.T) {
	busy := testutil.Start(t, buildHot(t))
	spool := filepath.Join(t.TempDir(), "spool")
	_, errOut, code := runSS(t, "record", "-q", "-d", "1s", "--timeout", "3s", "--otlp", testutil.DeadURL(t),
		"--spool", spool, fmt.Sprint(busy.PID))
	if code != 0 || !strings.HasPrefix(errOut, "stackshot: warning: the profile was not delivered") || !strings.Contains(errOut, "kept in "+spool) {
		t.Errorf("-q, collector down: exit %d, want the spool's warning:\n%s", code, errOut)
	}
	if ents, _ := os.ReadDir(spool); len(ents) != 1 {
		t.Errorf("the spool holds %d entries, want the profile", len(ents))
	}
}
