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

// BenchmarkRecordOTLPSend: what --otlp adds to a 2 s wall-clock record
// (--idle) of a process with 64 blocked threads, sent to the real
// Collector on a loopback port: building the OTLP profile, encoding and
// sending it until the collector answered. The same record written to a
// pprof file instead runs beside it, round by round; send-ms is the
// difference of the medians of the two records' wall times. (A blocked
// target keeps the machine quiet: recording 64 spinning threads on two
// cores took seconds more than asked, and that noise hid the send.)
func BenchmarkRecordOTLPSend(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	col := testutil.StartCollector(b, testutil.FreeAddr(b), filepath.Join(b.TempDir(), "out.jsonl"))
	dir := b.TempDir()
	var otlp, file []float64
	for i := 0; i < b.N; i++ {
		tg := testutil.Start(b, bin, "64")
		for _, to := range []string{"otlp", "file"} {
			args := []string{"record", "-q", "-F", "99", "-d", "2s", "--idle", fmt.Sprint(tg.PID)}
			if to == "otlp" {
				args = append(args, "--otlp", col.URL)
			} else {
				args = append(args, "-o", filepath.Join(dir, "p.pb.gz"))
			}
			start := time.Now()
			_, se, code := runSS(b, args...)
			ms := float64(time.Since(start).Microseconds()) / 1000
			if code != 0 {
				b.Fatalf("%v: exit %d: %s", args, code, se)
			}
			if to == "otlp" {
				otlp = append(otlp, ms)
			} else {
				file = append(file, ms)
			}
		}
		tg.Stop()
	}
	b.ReportMetric(median(otlp)-median(file), "send-ms")
	if st, err := os.Stat(filepath.Join(dir, "p.pb.gz")); err == nil {
		b.ReportMetric(float64(st.Size()), "pprof-bytes")
	}
}
