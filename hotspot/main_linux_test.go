//go:build linux

package hotspot_test

import (
	"os"
	"testing"

	"stackshot/sandbox"
)

// The test binary is the sandboxed child's image too (a session re-executes
// itself): started as sandbox.ChildCommand, it is the child.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ChildCommand {
		os.Exit(sandbox.Main())
	}
	os.Exit(m.Run())
}
