//go:build linux

package hotspot_test

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/live"
	"stackshot/ptrace"
	"stackshot/resolve"
	"stackshot/symtab"
	"stackshot/unwind"
)

// BenchmarkJVMDump measures a full dump (capture, unwinding, Java frames,
// names, lock diagnosis) of a JVM with 40 threads of its own sleeping in
// Java code, and beside it, once each, jstack -l and jhsdb jstack --mixed
// on the same process (ms per run, as reported metrics).
func BenchmarkJVMDump(b *testing.B) {
	testutil.Need(b, "javac")
	testutil.Need(b, "jar")
	java := testutil.Need(b, "java")
	jar := testutil.Artifact(b, "many.jar", testutil.Testdata("hotspot"),
		[]string{"javac", "-d", "$DIR/classes", "$SRC/Many.java"},
		[]string{"jar", "cf", "$OUT", "-C", "$DIR/classes", "."})
	tg := testutil.StartWithin(b, jvmReady, java, "-cp", jar, "Many")
	s := live.New(symtab.New(symtab.Options{}), live.Options{Capture: ptrace.Options{Kernel: true},
		Resolve: resolve.Options{MaxFrames: unwind.DefaultMaxFrames, Kernel: true, Live: true}, Timeout: time.Minute,
		Started: time.Now()})
	defer s.Close()
	if procs, _, err := s.Dump([]int{tg.PID}); err != nil || len(procs) != 1 || procs[0].Runtime == nil {
		b.Fatalf("dump: %v", err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, _, err := s.Dump([]int{tg.PID}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "stackshot-ms")
	b.StopTimer()
	pid := strconv.Itoa(tg.PID)
	for _, tool := range []struct {
		metric string
		args   []string
	}{{"jstack-ms", []string{"jstack", "-l", pid}}, {"jhsdb-ms", []string{"jhsdb", "jstack", "--mixed", "--pid", pid}}} {
		path, err := exec.LookPath(tool.args[0])
		if err != nil {
			continue
		}
		t0 := time.Now()
		if out, err := exec.Command(path, tool.args[1:]...).CombinedOutput(); err != nil {
			b.Logf("%s: %v\n%s", tool.args[0], err, out)
			continue
		}
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), tool.metric)
	}
}
