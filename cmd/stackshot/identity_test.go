//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// startReadyScript starts $TARGET as $A and waits for its "ready" line.
const startReadyScript = `
set -u
sleep 1000 | "$TARGET" > "$DIR/target.out" &
A=$!
n=0
until grep -q ready "$DIR/target.out"; do
	n=$((n+1)); [ $n -lt 1000 ] || { echo "target not ready" >&2; exit 9; }
	sleep 0.02
done
`

// replaceScript kills $STACKSHOT_PID and gives its pid to a new process
// (ns_last_pid), saying "newcomer=PID old=PID" on stderr.
const replaceScript = `
kill -9 "$STACKSHOT_PID"
n=0
while [ -e "/proc/$STACKSHOT_PID" ]; do
	n=$((n+1)); [ $n -lt 1000 ] || { echo "target not reaped" >&2; exit 9; }
	sleep 0.01
done
# stackshot's own new threads take pids of the namespace too: try again
# until the newcomer has the old pid.
i=0
while :; do
	echo $((STACKSHOT_PID - 1)) > /proc/sys/kernel/ns_last_pid
	sleep 1000 &
	[ "$!" = "$STACKSHOT_PID" ] && break
	kill "$!"
	i=$((i+1)); [ $i -lt 100 ] || break
done
echo "newcomer=$! old=$STACKSHOT_PID" >&2
`

// inPIDNamespace runs script (bash) in a PID namespace of its own, the
// hooked stackshot as $STACKSHOT, a blocked target as $TARGET, a
// directory as $DIR, env added; it returns stdout, stderr and the
// directory, and checks that the pid was given to a newcomer.
func inPIDNamespace(t *testing.T, script string, env ...string) (string, string, string) {
	t.Helper()
	needRoot(t)
	unshare := testutil.Need(t, "unshare")
	bin := hookedBin(t)
	target := buildBlocked(t, blockedVariants[0].flags)
	dir := t.TempDir()
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c", startReadyScript+script)
	cmd.Env = append(append(os.Environ(), "TARGET="+target, "DIR="+dir, "STACKSHOT="+bin), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, so.String(), se.String())
	}
	errOut := se.String()
	var newcomer, old string
	for _, line := range strings.Split(errOut, "\n") {
		if rest, ok := strings.CutPrefix(line, "newcomer="); ok {
			newcomer, old, _ = strings.Cut(rest, " old=")
		}
	}
	if newcomer == "" || newcomer != old {
		t.Fatalf("the test could not give the pid to a new process (newcomer %q, old %q):\n%s", newcomer, old, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "target.out")); !strings.HasPrefix(string(b), "ready") {
		t.Errorf("target output %q", b)
	}
	return so.String(), errOut, old
}

// The target exits in the middle of a dump (after its capture, before its
// resolution: the test hook) and a new process is given its PID at once
// (ns_last_pid, in a PID namespace of the test's own, so that no other
// process on the machine takes that PID first). The dump says so and shows
// neither process, instead of mixing them.
func TestDumpPIDReused(t *testing.T) {
	out, errOut, old := inPIDNamespace(t, `
"$STACKSHOT" dump "$A"
echo "exit=$?" >&2
`, "STACKSHOT_TEST_AFTER_CAPTURE="+replaceScript)
	if !strings.Contains(errOut, "process "+old+" was replaced during the dump") || !strings.Contains(errOut, "exit=1") {
		t.Errorf("the dump did not say the process was replaced, or exited 0:\n%s", errOut)
	}
	if strings.Contains(out, "Thread ") {
		t.Errorf("threads were shown for a replaced process:\n%s", out)
	}
}

// A series of snapshots (--interval/--count) whose target exits and whose
// pid is given to a new process between two snapshots, or during one
// (after its capture, before its resolution): the series ends there with
// a warning and exit 1, and the report is of the first process alone, over
// the snapshots taken of it.
func TestDumpSeriesPIDReused(t *testing.T) {
	for _, tc := range []struct {
		name, hook, want string
		kept             int
	}{
		// Before snapshot 3 reads it: 2 snapshots of the target.
		{"between snapshots", "STACKSHOT_TEST_BEFORE_SNAPSHOT=[ \"$STACKSHOT_SNAPSHOT\" = 3 ] || exit 0\n" + replaceScript,
			"at snapshot 3 of 4 (it exited and its pid was given to a new process, started ", 2},
		// After the capture of snapshot 2 (the hook's second run).
		{"during a snapshot", "STACKSHOT_TEST_AFTER_CAPTURE=echo >> \"$DIR/captures\"; [ $(wc -l < \"$DIR/captures\") = 2 ] || exit 0\n" + replaceScript,
			"at snapshot 2 of 4 (it exited and its pid was given to a new process, started ", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, old := inPIDNamespace(t, `
"$STACKSHOT" dump --json --interval 100ms --count 4 "$A"
echo "exit=$?" >&2
`, tc.hook)
			want := "stackshot: process " + old + " is not the process of the first snapshot " + tc.want
			if !strings.Contains(errOut, want) || !strings.Contains(errOut, "exit=1\n") {
				t.Errorf("stderr lacks %q or exit=1:\n%s", want, errOut)
			}
			var p jProc
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("bad JSON: %v\n%s\nstderr:\n%s", err, out, errOut)
			}
			if p.Comm == "sleep" || fmt.Sprint(p.PID) != old {
				t.Errorf("the report is of process %d %q, want the target %s", p.PID, p.Comm, old)
			}
			for _, name := range []string{"reader", "condwait"} {
				threadByName(t, p, name) // (fails the test when the target's thread is not there)
			}
			got := 0
			if p.ProgressSummary != nil {
				got = p.ProgressSummary.Snapshots
			}
			if tc.kept > 1 && got != tc.kept || tc.kept == 1 && got != 0 {
				t.Errorf("progress over %d snapshots, want %d (the target's only)", got, tc.kept)
			}
		})
	}
}

// A series whose target is replaced while its first snapshot is read: as
// for one snapshot, neither process is shown (not the newcomer's series
// instead), exit 1.
func TestDumpSeriesPIDReusedAtFirst(t *testing.T) {
	out, errOut, old := inPIDNamespace(t, `
"$STACKSHOT" dump --json --interval 100ms --count 3 "$A"
echo "exit=$?" >&2
`, "STACKSHOT_TEST_AFTER_CAPTURE=echo >> \"$DIR/captures\"; [ $(wc -l < \"$DIR/captures\") = 1 ] || exit 0\n"+replaceScript)
	if !strings.Contains(errOut, "stackshot: process "+old+" was replaced during the dump") || !strings.Contains(errOut, "exit=1\n") {
		t.Errorf("the dump did not say the process was replaced, or exited 0:\n%s", errOut)
	}
	if strings.TrimSpace(out) != "" && strings.TrimSpace(out) != "[]" {
		t.Errorf("a report was written for a process replaced at its first snapshot:\n%s", out)
	}
}

// dropScript is a target (python3 -c) that says "ready", then, once the
// file drop appears in the directory argv[1], gives up root for nobody
// (the same process: its pid and start time stay) and makes the file
// dropped there.
const dropScript = `
import os, sys, time
d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)  # (nobody cannot walk to it)
print("ready", flush=True)
while not os.access("drop", os.F_OK, dir_fd=d):
    time.sleep(0.01)
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
os.close(os.open("dropped", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=d))
while True:
    time.sleep(1)
`

// Whether a target's bytes are parsed in a sandboxed child is decided at
// each snapshot of a series: a root process that becomes nobody's between
// two snapshots (the same process) is parsed in the child from then on.
// The child crashes on purpose (test hook), which shows it was asked: the
// process loses its names, said in one line; the series is not ended.
func TestDumpSeriesDecidesSandboxAgain(t *testing.T) {
	needRoot(t)
	python := testutil.Need(t, "python3")
	bin := hookedBin(t)
	marks := t.TempDir()
	os.Chmod(marks, 0o777)
	tg := testutil.Start(t, python, "-c", dropScript, marks)
	hook := `[ "$STACKSHOT_SNAPSHOT" = 2 ] || exit 0
touch "$MARKS/drop"
n=0
until [ -e "$MARKS/dropped" ]; do
	n=$((n+1)); [ $n -lt 3000 ] || { echo "the target did not drop root" >&2; exit 9; }
	sleep 0.01
done`
	cmd := exec.Command(bin, "dump", "--json", "--interval", "100ms", "--count", "3", fmt.Sprint(tg.PID))
	cmd.Env = append(os.Environ(), "MARKS="+marks, "STACKSHOT_TEST_BEFORE_SNAPSHOT="+hook,
		"STACKSHOT_TEST_SANDBOX_HOOK=crash", "STACKSHOT_SANDBOX=")
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	if _, err := os.Stat(filepath.Join(marks, "dropped")); err != nil {
		t.Fatalf("the target did not drop root: %s", se.String())
	}
	if want := fmt.Sprintf("names of process %d lost: the sandboxed parser failed", tg.PID); !strings.Contains(se.String(), want) ||
		strings.Contains(se.String(), "not the process of the first snapshot") {
		t.Errorf("stderr lacks %q (or ends the series):\n%s", want, se.String())
	}
	var p jProc
	if err := json.Unmarshal([]byte(so.String()), &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, so.String())
	}
	for _, th := range p.Threads {
		for _, f := range th.Frames {
			if f.Function != nil && f.Kind == "user" {
				t.Errorf("thread %s: %q named in-process after the target became nobody's", th.Name, *f.Function)
			}
		}
	}
}
