//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"stackshot/internal/testutil"
)

// BenchmarkRecordOTLPSend: what --otlp adds to a 10 s record of a
// 64-thread process (the hot target's spinners) sent to the real Collector
// on a loopback port: building the OTLP profile, encoding and sending it
// until the collector answered, as record -v reports it.
func BenchmarkRecordOTLPSend(b *testing.B) {
	bin := buildHot(b)
	col := testutil.StartCollector(b, testutil.FreeAddr(b), filepath.Join(b.TempDir(), "out.jsonl"))
	re := regexp.MustCompile(`profile sent to \S+ in ([0-9.]+) ms \(([0-9]+) bytes\)`)
	var total float64
	var size int
	for i := 0; i < b.N; i++ {
		tg := testutil.Start(b, bin, "spin", "64", "15")
		_, se, code := runSS(b, "record", "-v", "-F", "99", "-d", "10s", "--otlp", col.URL, fmt.Sprint(tg.PID))
		tg.Stop()
		m := re.FindStringSubmatch(se)
		if code != 0 || m == nil {
			b.Fatalf("exit %d: %s", code, se)
		}
		ms, _ := strconv.ParseFloat(m[1], 64)
		size, _ = strconv.Atoi(m[2])
		total += ms
		b.Logf("sent in %.1f ms, %d bytes", ms, size)
	}
	b.ReportMetric(total/float64(b.N), "send-ms")
	b.ReportMetric(float64(size), "body-bytes")
}
