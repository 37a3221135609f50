//go:build linux

package ptrace

import (
	"fmt"
	"sort"
	"testing"

	"stackshot/internal/testutil"
)

// BenchmarkCapture measures a whole-process capture of targets with 1, 16,
// 128 and 512 threads, blocked or spinning, in each mode: ns/op is the wall
// time of one capture, and the per-thread pause is reported as
// pause-med-us, pause-p99-us and pause-max-us (over every thread of every
// iteration). Unwinding and symbolization are not included.
func BenchmarkCapture(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	for _, kind := range []string{"blocked", "spin"} {
		for _, n := range []int{1, 16, 128, 512} {
			if kind == "spin" && n > 16 {
				// Spinning threads beyond the core count measure the
				// scheduler, not stackshot; 16 already oversubscribes.
				continue
			}
			b.Run(fmt.Sprintf("%s-%d", kind, n), func(b *testing.B) {
				args := []string{fmt.Sprint(n)}
				if kind == "spin" {
					args = append(args, "spin")
				}
				tg := testutil.Start(b, bin, args...)
				for _, mode := range []struct {
					name string
					m    Mode
				}{{"auto", ModeAuto}, {"stop", ModeStop}} {
					b.Run(mode.name, func(b *testing.B) {
						var pauses []int64
						nostop := 0
						total := 0
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							p, err := Capture(tg.PID, Options{Mode: mode.m, Kernel: true}, nil)
							if err != nil {
								b.Fatal(err)
							}
							for _, th := range p.Threads {
								total++
								switch th.Method {
								case MethodPtrace:
									pauses = append(pauses, th.PauseNS)
								case MethodNoStop:
									nostop++
								}
							}
						}
						b.StopTimer()
						sort.Slice(pauses, func(i, j int) bool { return pauses[i] < pauses[j] })
						if len(pauses) > 0 {
							b.ReportMetric(float64(pauses[len(pauses)/2])/1e3, "pause-med-us")
							b.ReportMetric(float64(pauses[min(len(pauses)-1, len(pauses)*99/100)])/1e3, "pause-p99-us")
							b.ReportMetric(float64(pauses[len(pauses)-1])/1e3, "pause-max-us")
						}
						b.ReportMetric(float64(nostop)/float64(total)*100, "%nostop")
					})
				}
			})
		}
	}
}
