//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// TestReportReplacedBinaryStopsAndUsesDebugDir: a capture is reported
// after its binary was replaced by another build. Without help, frames in
// it are marked as a mismatch and the walk stops there, saying why (it
// used to skip frames by stack scanning against the wrong code, without a
// word). With --debug-dir holding a file of the build id that ran (a
// separate debug file, or the binary itself in a build-id tree), its
// frames get their names back; with the binary, the whole chain.
func TestReportReplacedBinaryStopsAndUsesDebugDir(t *testing.T) {
	testutil.Need(t, "objcopy")
	orig := buildBlocked(t, blockedVariants[1].flags)
	other := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O1", "-g", "-pthread")
	dir := t.TempDir()
	path := filepath.Join(dir, "victim")
	copyFile(t, orig, path)
	tg := testutil.Start(t, path)
	file := filepath.Join(dir, "v.cap")
	if _, errOut, code := runSS(t, "capture", strconv.Itoa(tg.PID), "-o", file); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errOut)
	}
	tg.Stop()
	os.Remove(path)
	copyFile(t, other, path)

	p := reportCore(t, file)
	th := threadByName(t, p, "reader")
	var id string
	for i, f := range th.Frames {
		if f.Module != path {
			continue
		}
		id = f.BuildID
		if !f.BuildIDMismatch || f.Function != nil {
			t.Errorf("frame in the replaced binary: mismatch %v function %q", f.BuildIDMismatch, f.Fn())
		}
		if i != len(th.Frames)-1 {
			t.Errorf("%d frames found past the replaced binary's first frame (guessed against the wrong code)", len(th.Frames)-1-i)
		}
		break
	}
	if th.Error == nil || !strings.Contains(*th.Error, "not the one mapped") {
		t.Errorf("reader: error %v, want the reason the walk stopped", th.Error)
	}
	if len(id) < 3 {
		t.Fatalf("no build id on the replaced module's frame: %+v", th.Frames)
	}

	// A separate debug file of the build that ran: names.
	dbg := filepath.Join(dir, "dbg")
	tree := filepath.Join(dbg, ".build-id", id[:2])
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("objcopy", "--only-keep-debug", orig, filepath.Join(tree, id[2:]+".debug")).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	p = reportCore(t, "--debug-dir", dbg, file)
	th = threadByName(t, p, "reader")
	// Names, not code: the walk stops at the first frame there, saying why.
	if f := fnames(th); len(f) == 0 || f[len(f)-1] != "reader_c" {
		t.Errorf("with the debug file: reader %v, want it to end at reader_c, named", f)
	}
	if th.Error == nil || !strings.Contains(*th.Error, "module code unknown") {
		t.Errorf("with the debug file: reader error %v, want why the walk stopped", th.Error)
	}
	for _, f := range th.Frames {
		if f.Module == path && f.BuildIDMismatch {
			t.Errorf("with the debug file: frame still marked a mismatch: %+v", f)
		}
	}

	// The binary that ran, in a build-id tree: the whole chain.
	os.Remove(filepath.Join(tree, id[2:]+".debug"))
	copyFile(t, orig, filepath.Join(tree, id[2:]))
	p = reportCore(t, "--debug-dir", dbg, file)
	assertThreadChain(t, threadByName(t, p, "reader"), "reader_c", "reader_b", "reader_a", "start")
}
