//go:build linux && stackshot_testhooks

package live

import (
	"fmt"
	"os"
	"os/exec"
)

// Built only with -tags stackshot_testhooks (the command's tests do):
// STACKSHOT_TEST_AFTER_CAPTURE=SHELL-COMMAND runs that command, with
// STACKSHOT_PID set, between a process's capture and its resolution.
func init() {
	if script := os.Getenv("STACKSHOT_TEST_AFTER_CAPTURE"); script != "" {
		afterCaptureHook = func(pid int) {
			cmd := exec.Command("sh", "-c", script)
			cmd.Env = append(os.Environ(), fmt.Sprintf("STACKSHOT_PID=%d", pid))
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "test hook: %v\n", err)
			}
		}
	}
}
