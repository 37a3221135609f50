//go:build linux

package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// Without libc's debug file (libc6-dbg) the standard streams' locks are
// still named: stackshot and the target run in mount namespaces of their
// own where /usr/lib/debug is an empty directory, so only libc's .dynsym
// is there.
// The target prints stdout's FILE; its _lock member, read from the
// target's memory by the test, says which lock that is.
func TestStdioLockNamedWithoutDebugFile(t *testing.T) {
	unshare := testutil.Need(t, "unshare")
	if os.Geteuid() != 0 {
		testutil.Skip(t, "hiding /usr/lib/debug in a mount namespace needs root here")
	}
	// (The target in such a namespace too: debug files are looked for
	// in its root as well.)
	hide := "mount -t tmpfs none /usr/lib/debug && test -z \"$(ls -A /usr/lib/debug)\" && exec "
	tg := testutil.Start(t, unshare, "--mount", "--propagation", "private", "sh", "-c", hide+buildEdges(t)+" stdio")
	v := readyVals(t, tg.Ready)
	holder, printer := tidOf(t, v, "holder"), tidOf(t, v, "printer")
	script := fmt.Sprintf("%s dump --json --no-debuginfod --no-cache %d", stackshotBin, tg.PID)
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", hide+script)
	cmd.Env = append(os.Environ(), "DEBUGINFOD_URLS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("stackshot with /usr/lib/debug hidden: %v\n%s", err, out)
	}
	var p dProc
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	pw := threadByTID(t, p, printer).WaitingFor
	if pw == nil || pw.Kind != "stdio-lock" || pw.OwnerTID == nil || *pw.OwnerTID != holder || pw.Address == nil {
		t.Fatalf("printer waits for %+v, want a stdio-lock held by %d", pw, holder)
	}
	// Which lock stdout's is: the _lock member of the FILE the target
	// printed, read from its memory here.
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", tg.PID))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fp, err := strconv.ParseUint(strings.TrimPrefix(v["stdout"], "0x"), 16, 64)
	if err != nil {
		t.Fatalf("no stdout in %v", v)
	}
	var b [8]byte
	if _, err := f.ReadAt(b[:], int64(fp+0x88)); err != nil {
		t.Fatal(err)
	}
	lock := fmt.Sprintf("%#x", binary.LittleEndian.Uint64(b[:]))
	if lock != *pw.Address {
		t.Fatalf("gdb says stdout's lock is %s, stackshot's printer waits for %s", lock, *pw.Address)
	}
	if pw.Symbol != "stdout" {
		t.Errorf("stdout's lock (%s) is named %q without libc's debug file, want \"stdout\"", lock, pw.Symbol)
	}
}
