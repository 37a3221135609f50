//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"testing"

	"stackshot/internal/testutil"
)

// BenchmarkDump runs the whole command (`stackshot --json PID`: capture,
// unwind, symbolize, print) against targets with 1, 16, 128 and 512 threads,
// blocked or spinning, in the default mode and in --mode stop; ns/op is the
// wall time of one dump, and the per-thread pause is reported from the
// JSON's pause_us. The same target is dumped by `eu-stack -p` (Debian's
// elfutils) and `gdb -batch -ex "thread apply all bt"` when installed, for
// comparison.
func BenchmarkDump(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	for _, kind := range []string{"blocked", "spin"} {
		for _, n := range []int{1, 16, 128, 512} {
			if kind == "spin" && n > 16 {
				continue // more spinners than cores measure the scheduler
			}
			b.Run(fmt.Sprintf("%s-%d", kind, n), func(b *testing.B) {
				args := []string{fmt.Sprint(n)}
				if kind == "spin" {
					args = append(args, "spin")
				}
				tg := testutil.Start(b, bin, args...)
				pid := fmt.Sprint(tg.PID)
				// The pstack-style text dump (default mode), and JSON (which
				// also loads the debug info for lines) in both modes, whose
				// pause_us gives the per-thread pauses.
				for _, run := range []struct {
					name string
					args []string
				}{
					{"stackshot-text", nil},
					{"stackshot-json-auto", []string{"--json"}},
					{"stackshot-json-stop", []string{"--json", "--mode", "stop"}},
				} {
					b.Run(run.name, func(b *testing.B) {
						var pauses []float64
						args := append(append([]string{}, run.args...), pid)
						for i := 0; i < b.N; i++ {
							out, err := exec.Command(stackshotBin, args...).Output()
							if err != nil {
								b.Fatal(err)
							}
							if run.args == nil {
								continue
							}
							b.StopTimer()
							var p jProc
							if err := json.Unmarshal(out, &p); err != nil {
								b.Fatal(err)
							}
							for _, th := range p.Threads {
								if th.Capture == "ptrace" {
									pauses = append(pauses, th.PauseUS)
								}
							}
							b.StartTimer()
						}
						if len(pauses) > 0 {
							sort.Float64s(pauses)
							b.ReportMetric(pauses[len(pauses)/2], "pause-med-us")
							b.ReportMetric(pauses[min(len(pauses)-1, len(pauses)*99/100)], "pause-p99-us")
						}
					})
				}
				if eu, err := exec.LookPath("eu-stack"); err == nil {
					b.Run("eu-stack", func(b *testing.B) {
						for i := 0; i < b.N; i++ {
							exec.Command(eu, "-p", pid).Run()
						}
					})
				}
				if gdb, err := exec.LookPath("gdb"); err == nil && n <= 128 {
					b.Run("gdb", func(b *testing.B) {
						for i := 0; i < b.N; i++ {
							exec.Command(gdb, "-q", "-batch", "-nx", "-p", pid, "-ex", "thread apply all bt").Run()
						}
					})
				}
			})
		}
	}
}
