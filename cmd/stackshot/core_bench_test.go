//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"stackshot/capfile"
	"stackshot/internal/safefile"
	"stackshot/internal/testutil"
)

// BenchmarkCore measures ELF cores of a 512-thread target (many.c, every
// thread blocked in pthread_cond_wait): the capture alone (ptrace stops,
// stack copies, build ids: what every capture pays), what writing the
// core adds to it (reading the dynamic linker's pages and ELF headers,
// building and writing the file), and, as whole commands, `capture -o
// FILE.core`, `report FILE.core` and the live `--json` dump whose
// unwinding and symbolization the report repeats.
func BenchmarkCore(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, bin, "512")
	pid := fmt.Sprint(tg.PID)
	dir := b.TempDir()
	core := filepath.Join(dir, "many.core")
	c := newCommon("capture")
	if err := c.parse([]string{pid}, true); err != nil {
		b.Fatal(err)
	}
	s := c.newSession(false)
	b.Run("capture-512", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := s.Capture(tg.PID, time.Now().Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
	})
	p, err := s.Capture(tg.PID, time.Now().Add(time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("write-core-512", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			data, err := s.Core(p, capfile.CoreStacks)
			if err == nil {
				err = safefile.Output(core, data, safefile.Private)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if st, err := os.Stat(core); err == nil {
			b.ReportMetric(float64(st.Size())/(1<<20), "core-MiB")
		}
	})
	for _, run := range []struct {
		name string
		args []string
	}{
		{"cmd-capture-core-512", []string{"capture", pid, "-o", core}},
		{"cmd-report-core-512", []string{"report", "--json", core}},
		{"cmd-dump-json-512", []string{"--json", pid}},
	} {
		b.Run(run.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if out, err := exec.Command(stackshotBin, run.args...).CombinedOutput(); err != nil {
					b.Fatalf("%v: %v\n%.300s", run.args, err, out)
				}
			}
		})
	}
}
