//go:build linux && stackshot_testhooks

package live

import (
	"fmt"
	"os"
	"os/exec"
)

// Built only with -tags stackshot_testhooks (the command's tests do):
// STACKSHOT_TEST_AFTER_CAPTURE=SHELL-COMMAND runs that command, with
// STACKSHOT_PID set, between a process's capture and its resolution;
// STACKSHOT_TEST_BEFORE_SNAPSHOT=SHELL-COMMAND, with STACKSHOT_PID and
// STACKSHOT_SNAPSHOT (2, 3, ...) set, before each later snapshot of a
// --count series reads the process.
func init() {
	if script := os.Getenv("STACKSHOT_TEST_BEFORE_SNAPSHOT"); script != "" {
		beforeSnapshotHook = func(pid, n int) {
			runHook(script, fmt.Sprintf("STACKSHOT_PID=%d", pid), fmt.Sprintf("STACKSHOT_SNAPSHOT=%d", n))
		}
	}
	if script := os.Getenv("STACKSHOT_TEST_AFTER_CAPTURE"); script != "" {
		afterCaptureHook = func(pid int) { runHook(script, fmt.Sprintf("STACKSHOT_PID=%d", pid)) }
	}
}

// runHook runs a test hook's shell command with env added.
func runHook(script string, env ...string) {
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "test hook: %v\n", err)
	}
}
