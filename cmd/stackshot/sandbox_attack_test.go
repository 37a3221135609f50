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
	"time"

	"stackshot/internal/testutil"
)

// A process running as nobody that sends SIGKILL to every child of a
// sandboxed dump the moment it appears, over and over (the attack that
// once made stackshot parse the target in-process), is refused every
// time: the child runs as a uid of its own. The child pauses as root and
// then as its user (test hooks), so that the attacker sees it at every
// stage of its start. The dump exits 0 with every frame named, and nothing
// is parsed in-process.
func TestSandboxChildNotKillable(t *testing.T) {
	bin := hookedBin(t)
	svc := startService(t)
	setpriv := testutil.Need(t, "setpriv")
	killer := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "killchildren.c")}, "-O2")
	att := testutil.Start(t, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", killer)
	parsed := filepath.Join(t.TempDir(), "inprocess")
	cmd := exec.Command(bin, "dump", "--json", fmt.Sprint(svc.PID))
	cmd.Env = append(os.Environ(), "STACKSHOT_SANDBOX=", "STACKSHOT_TEST_INPROCESS_LOG="+parsed,
		"STACKSHOT_TEST_CHILD_PAUSE_ROOT=300ms", "STACKSHOT_TEST_CHILD_PAUSE_USER=300ms")
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if got := att.Ask(fmt.Sprint(cmd.Process.Pid)); got != "watching" {
		t.Fatalf("attacker: %q", got)
	}
	err := cmd.Wait()
	fate, ferr := att.ReadLine(60 * time.Second)
	if err != nil {
		t.Fatalf("dump: %v\n%s", err, se.String())
	}
	var killed, refused int
	if _, err := fmt.Sscanf(fate, "killed %d refused %d", &killed, &refused); err != nil || ferr != nil {
		t.Fatalf("attacker said %q (%v %v)", fate, err, ferr)
	}
	if killed != 0 || refused == 0 {
		t.Errorf("attacker as nobody: killed %d of the dump's children, refused %d times (want 0 killed, some refused)", killed, refused)
	}
	if b, err := os.ReadFile(parsed); !os.IsNotExist(err) {
		t.Errorf("parsed in-process: %q (%v)", b, err)
	}
	if se.String() != "" {
		t.Errorf("stderr: %s", se.String())
	}
	var proc jProc
	if err := json.Unmarshal([]byte(so.String()), &proc); err != nil {
		t.Fatalf("%v\n%s", err, so.String())
	}
	checkBlocked(t, proc, svc.PID)
}
