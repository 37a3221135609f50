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
func init() {
	TestHook = os.Getenv("STACKSHOT_TEST_SANDBOX_HOOK")
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "STACKSHOT_TEST_") {
			TestEnv = append(TestEnv, kv)
		}
	}
}
