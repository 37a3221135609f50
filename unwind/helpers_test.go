package unwind

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"stackshot/internal/testutil"
	"strings"
	"sync"
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

var buildMu sync.Mutex

// buildTarget compiles a source from testdata/unwind with the given
// compiler and flags into a per-package cache dir keyed by the source and
// the command, and returns the binary's path.
func buildTarget(t testing.TB, compiler, src string, flags ...string) string {
	t.Helper()
	needLinuxAmd64(t)
	cc := needTool(t, compiler)
	srcPath, err := filepath.Abs(filepath.Join("..", "testdata", "unwind", src))
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile(srcPath)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write(code)
	h.Write([]byte(compiler + "\x00" + strings.Join(flags, "\x00")))
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	dir := filepath.Join(os.TempDir(), "stackshot-unwind-test")
	out := filepath.Join(dir, strings.TrimSuffix(src, filepath.Ext(src))+"-"+sum)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := out + ".tmp"
	args := append(append([]string{}, flags...), "-o", tmp, srcPath)
	cmd := exec.Command(cc, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// O2 flags of the C targets: optimized, no frame pointers.
var cFlagsO2 = []string{"-O2", "-fomit-frame-pointer", "-g", "-pthread", "-fno-builtin", "-Wl,-z,lazy"}
