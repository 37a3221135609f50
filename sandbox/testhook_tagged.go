//go:build linux && stackshot_testhooks

package sandbox

import (
	"os"
	"strings"
)

// Built only with -tags stackshot_testhooks (the command's tests do):
// STACKSHOT_TEST_SANDBOX_HOOK=crash|oom|hang makes each sandboxed child
// fail that way when asked to resolve (see TestHook); the other
// STACKSHOT_TEST_* hooks are passed on to the child, to act there too.
// STACKSHOT_TEST_INPROCESS_LOG names a file each parsing of a target's
// bytes inside stackshot itself adds a line to (CountInProcess): the
// command's tests read it.
func init() {
	straceDir = os.Getenv("STACKSHOT_TEST_STRACE_DIR")
	if path := os.Getenv("STACKSHOT_TEST_INPROCESS_LOG"); path != "" {
		onInProcess = func(what string) {
			if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
				f.WriteString(what + "\n")
				f.Close()
			}
		}
	}
	TestHook = os.Getenv("STACKSHOT_TEST_SANDBOX_HOOK")
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "STACKSHOT_TEST_") {
			TestEnv = append(TestEnv, kv)
		}
	}
}
