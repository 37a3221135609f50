package unwind

import (
	"path/filepath"
	"runtime"
	"stackshot/internal/testutil"
	"strings"
	"testing"
)

const libcPath = "/lib/x86_64-linux-gnu/libc.so.6"

// skipUnless skips the test, with the reason, when the machine lacks a tool
// or file the test needs.
func skipUnless(t testing.TB, ok bool, reason string) {
	t.Helper()
	if !ok {
		testutil.Skip(t, reason)
	}
}

func needTool(t testing.TB, name string) string {
	t.Helper()
	return testutil.Need(t, name)
}

func needLinuxAmd64(t testing.TB) {
	t.Helper()
	skipUnless(t, runtime.GOOS == "linux" && runtime.GOARCH == "amd64", "needs linux/amd64, have "+runtime.GOOS+"/"+runtime.GOARCH)
}

// buildTarget compiles a source from testdata/unwind with the given
// compiler and flags (`compiler flags... -o OUT SRC`: for go, the first
// flag is "build") and returns the binary's path.
func buildTarget(t testing.TB, compiler, src string, flags ...string) string {
	t.Helper()
	needLinuxAmd64(t)
	needTool(t, compiler)
	step := append(append([]string{compiler}, flags...), "-o", "$OUT", "$SRC/"+src)
	return testutil.Artifact(t, strings.TrimSuffix(src, filepath.Ext(src)), testutil.Testdata("unwind"), step)
}

// O2 flags of the C targets: optimized, no frame pointers.
var cFlagsO2 = []string{"-O2", "-fomit-frame-pointer", "-g", "-pthread", "-fno-builtin", "-Wl,-z,lazy"}
