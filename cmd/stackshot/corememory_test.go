//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"stackshot/capfile"
	"stackshot/internal/testutil"
)

// TestCoreMemoryModes: --core-memory stacks (the default) leaves the
// program's globals out of the core; writable puts them in, so gdb prints
// a global as it was (blocked.c's "started" counts its 6 threads); all
// adds the read-only mappings too.
func TestCoreMemoryModes(t *testing.T) {
	testutil.Need(t, "gdb")
	exe := buildBlocked(t, blockedVariants[1].flags)
	tg := testutil.Start(t, exe)
	dir := t.TempDir()
	sizes := map[string]int64{}
	for _, mode := range []string{"stacks", "writable", "all"} {
		file := filepath.Join(dir, mode+".core")
		if _, errOut, code := runSS(t, "capture", strconv.Itoa(tg.PID), "--core-memory", mode, "-o", file); code != 0 {
			t.Fatalf("capture --core-memory %s: exit %d: %s", mode, code, errOut)
		}
		st, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		sizes[mode] = st.Size()
	}
	tg.Stop()
	if !(sizes["stacks"] < sizes["writable"] && sizes["writable"] < sizes["all"]) {
		t.Errorf("core sizes %v: want stacks < writable < all", sizes)
	}
	gdbPrint := func(core string) (string, uint64) {
		out, _ := exec.Command("gdb", "-batch", "-nx", "-ex", "print started", "-ex", "print/x &started", exe, core).CombinedOutput()
		v := regexp.MustCompile(`(?m)^\$1 = (.*)$`).FindSubmatch(out)
		a := regexp.MustCompile(`(?m)^\$2 = 0x([0-9a-f]+)`).FindSubmatch(out)
		if v == nil || a == nil {
			t.Fatalf("gdb: %s", out)
		}
		addr, _ := strconv.ParseUint(string(a[1]), 16, 64)
		return string(v[1]), addr
	}
	if v, _ := gdbPrint(filepath.Join(dir, "writable.core")); v != "6" {
		t.Errorf("gdb prints started = %s from the writable core, want 6", v)
	}
	_, addr := gdbPrint(filepath.Join(dir, "stacks.core"))
	f, err := os.Open(filepath.Join(dir, "stacks.core"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	c, err := capfile.ReadCore(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	if n, _ := c.Mem.ReadAt(b[:], int64(addr)); n != 0 {
		t.Errorf("the stacks-only core holds the global at %#x", addr)
	}
}

// TestCoreSeveralPIDs: a core holds one process: several pids need %p in
// the name (else a usage error, before anything is stopped), and then
// each gets its own core.
func TestCoreSeveralPIDs(t *testing.T) {
	exe := buildBlocked(t, blockedVariants[1].flags)
	a, b := testutil.Start(t, exe), testutil.Start(t, exe)
	dir := t.TempDir()
	_, errOut, code := runSS(t, "capture", strconv.Itoa(a.PID), strconv.Itoa(b.PID), "-o", filepath.Join(dir, "x.core"))
	if code != 2 || !regexp.MustCompile(`^stackshot: .*%p`).MatchString(errOut) {
		t.Errorf("two pids, one core name: exit %d, %q; want 2 and a hint about %%p", code, errOut)
	}
	if _, errOut, code := runSS(t, "capture", "--format", "core", strconv.Itoa(a.PID), strconv.Itoa(b.PID), "-o", filepath.Join(dir, "x-%p")); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errOut)
	}
	for _, tg := range []*testutil.Target{a, b} {
		p := reportCore(t, filepath.Join(dir, "x-"+strconv.Itoa(tg.PID)))
		if p.PID != tg.PID || len(p.Threads) != 7 {
			t.Errorf("core of %d: pid %d, %d threads", tg.PID, p.PID, len(p.Threads))
		}
	}
}
