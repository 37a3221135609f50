//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// The target exits in the middle of a dump (after its capture, before its
// resolution: the test hook) and a new process is given its PID at once
// (ns_last_pid, in a PID namespace of the test's own, so that no other
// process on the machine takes that PID first). The dump says so and shows
// neither process, instead of mixing them.
func TestDumpPIDReused(t *testing.T) {
	needRoot(t)
	unshare := testutil.Need(t, "unshare")
	bin := hookedBin(t)
	target := buildBlocked(t, blockedVariants[0].flags)
	dir := t.TempDir()
	script := `
set -u
sleep 1000 | "$TARGET" > "$DIR/target.out" &
A=$!
n=0
until grep -q ready "$DIR/target.out"; do
	n=$((n+1)); [ $n -lt 1000 ] || { echo "target not ready" >&2; exit 9; }
	sleep 0.02
done
"$STACKSHOT" dump "$A"
echo "exit=$?" >&2
`
	hook := `
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
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "bash", "-c", script)
	cmd.Env = append(os.Environ(), "TARGET="+target, "DIR="+dir, "STACKSHOT="+bin,
		"STACKSHOT_TEST_AFTER_CAPTURE="+hook)
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
	if !strings.Contains(errOut, "process "+old+" was replaced during the dump") || !strings.Contains(errOut, "exit=1") {
		t.Errorf("the dump did not say the process was replaced, or exited 0:\n%s", errOut)
	}
	if strings.Contains(so.String(), "Thread ") {
		t.Errorf("threads were shown for a replaced process:\n%s", so.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "target.out")); !strings.HasPrefix(string(b), "ready") {
		t.Errorf("target output %q", b)
	}
}
