//go:build linux && stackshot_testhooks

package main

import (
	"os"

	"stackshot/sandbox"
)

// Built only with -tags stackshot_testhooks (the command's tests do):
// STACKSHOT_TEST_SANDBOX_HOOK=crash|oom|hang makes each sandboxed child
// fail that way when asked to resolve (see sandbox.TestHook).
func init() {
	sandbox.TestHook = os.Getenv("STACKSHOT_TEST_SANDBOX_HOOK")
}
