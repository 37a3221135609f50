//go:build linux

package live

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/resolve"
	"stackshot/symtab"
	"stackshot/unwind"
)

// hot is testdata/targets/hot.c, built.
func hot(t testing.TB) string {
	return testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "hot.c")}, "-O2", "-g", "-pthread")
}

// A process read after it exited is said to have exited, once: no
// doubled "reading maps: reading maps:".
func TestExitedMidReadMessage(t *testing.T) {
	tg := testutil.Start(t, hot(t))
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", tg.PID))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tg.Stop() // killed and reaped: the open file now reads ESRCH
	_, err = procmaps.ParseMaps(f)
	if err == nil {
		t.Skip("this kernel reads the maps of a reaped process without an error")
	}
	msg := ExplainCaptureError(tg.PID, fmt.Errorf("reading maps: %w", err)).Error()
	want := fmt.Sprintf("cannot read process %d (it exited while being read; nothing to show)", tg.PID)
	if msg != want {
		t.Errorf("got %q, want %q", msg, want)
	}
}

// As root, a refusal does not end in "run as root".
func TestPermissionHelpAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root")
	}
	tg := testutil.Start(t, hot(t))
	if h := permissionHelp(tg.PID); strings.Contains(h, "run as root") || strings.Contains(h, "or as root") {
		t.Errorf("as root, the hint says to run as root: %q", h)
	}
}

// newBenchSession is a session as dump's defaults make it.
func newBenchSession() *Session {
	return New(symtab.New(symtab.Options{NamesOnly: true}), Options{Capture: ptrace.Options{Kernel: true},
		Resolve: resolve.Options{MaxFrames: unwind.DefaultMaxFrames, Kernel: true}, Timeout: 10 * time.Second,
		Goroutines: true, Started: time.Now()})
}
