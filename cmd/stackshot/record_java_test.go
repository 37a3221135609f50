//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// record of a JVM thread that spends 3/4 of its time in Hot.hotA and 1/4
// in Hot.hotB (by its clock) keeps the Java frames: the folded profile
// names both methods, in those shares within 10 points (walked through
// their compiled frames by frame size).
func TestRecordJavaShares(t *testing.T) {
	testutil.Need(t, "javac")
	testutil.Need(t, "jar")
	java := testutil.Need(t, "java")
	jar := testutil.Artifact(t, "hot.jar", testutil.Testdata("hotspot"),
		[]string{"javac", "-d", "$DIR/classes", "$SRC/Hot.java"},
		[]string{"jar", "cf", "$OUT", "-C", "$DIR/classes", "."})
	// Each method its own compiled code (no inlining): a sample in
	// spinFor is attributed by its caller's return address, exactly.
	tg := testutil.StartWithin(t, 3*time.Minute, java, "-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,Hot::*", "-cp", jar, "Hot")
	out := filepath.Join(t.TempDir(), "p.folded")
	_, errOut, code := runSS(t, "record", "-F", "199", "-d", "4s", "-o", out, fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := foldedShares(t, string(b), "Hot.hotA", "Hot.hotB")
	a, bb := got["Hot.hotA"], got["Hot.hotB"]
	if a+bb < 100 {
		t.Fatalf("only %d samples in Hot.hotA+Hot.hotB:\n%s", a+bb, b)
	}
	share := float64(a) / float64(a+bb)
	if share < 0.65 || share > 0.85 {
		t.Errorf("Hot.hotA has %.0f%% of Hot.hotA+Hot.hotB samples (%d/%d), want 75%% ± 10", share*100, a, a+bb)
	}
	t.Logf("Hot.hotA %d, Hot.hotB %d: %.1f%%", a, bb, share*100)
}
