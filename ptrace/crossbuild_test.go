package ptrace

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"stackshot/internal/testutil"
)

// A capture's data (Process, Thread, outcomes) builds on any OS, so saved
// captures can be read anywhere; only the live capture is Linux-only.
func TestDataBuildsOnDarwin(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		testutil.Skip(t, "no go tool beside this test's GOROOT")
	}
	cmd := exec.Command(goTool, "build", "./ptrace", "./procmaps")
	cmd.Dir = testutil.Root()
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=darwin go build ./ptrace ./procmaps: %v\n%s", err, out)
	}
}
