//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

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

// BenchmarkDumpVsEuStack times the plain text dump (`stackshot PID`, the
// pstack use: a fresh process each time, nothing cached) beside
// `eu-stack -n 0 -p PID` (elfutils) on the same target in the same run, the two
// alternating so both see the same machine load: one thread, 16 and 512
// threads blocked in pthread_cond_wait (testdata/targets/many.c), and one
// thread 1,000 frames deep (testdata/realworld/deep.c). ns/op is
// stackshot's wall time; the custom metrics are the medians of each tool's
// wall time and of its CPU time (user+system, which a loaded machine
// disturbs less), in ms. eu-stack's are absent where it is not installed.
// STACKSHOT_BASELINE=BIN adds another stackshot build (an older commit's)
// to the rotation, reported as baseline-ms and baseline-cpu-ms: before and
// after measured in one run.
func BenchmarkDumpVsEuStack(b *testing.B) {
	baseline := os.Getenv("STACKSHOT_BASELINE")
	many := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	deep := testutil.Build(b, "gcc", []string{testutil.Testdata("realworld", "deep.c")}, "-O0", "-g")
	eu, euErr := exec.LookPath("eu-stack")
	for _, c := range []struct {
		name string
		bin  string
		arg  string
	}{
		{"threads-1", many, "1"},
		{"threads-16", many, "16"},
		{"threads-512", many, "512"},
		{"deep-1000", deep, "1000"},
	} {
		b.Run(c.name, func(b *testing.B) {
			tg := testutil.Start(b, c.bin, c.arg)
			pid := fmt.Sprint(tg.PID)
			var ssWall, ssCPU, euWall, euCPU, baseWall, baseCPU []float64
			run := func(name string, args ...string) (wall, cpu float64) {
				cmd := exec.Command(name, args...)
				start := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatalf("%s %v: %v", name, args, err)
				}
				wall = float64(time.Since(start).Microseconds()) / 1000
				ps := cmd.ProcessState
				cpu = float64((ps.UserTime() + ps.SystemTime()).Microseconds()) / 1000
				return wall, cpu
			}
			for i := 0; i < b.N; i++ {
				w, c := run(stackshotBin, pid)
				ssWall, ssCPU = append(ssWall, w), append(ssCPU, c)
				if euErr == nil {
					b.StopTimer()
					w, c := run(eu, "-n", "0", "-p", pid) // all frames, as stackshot shows (up to 1024)
					euWall, euCPU = append(euWall, w), append(euCPU, c)
					b.StartTimer()
				}
				if baseline != "" {
					b.StopTimer()
					w, c := run(baseline, pid)
					baseWall, baseCPU = append(baseWall, w), append(baseCPU, c)
					b.StartTimer()
				}
			}
			b.ReportMetric(median(ssWall), "stackshot-ms")
			b.ReportMetric(median(ssCPU), "stackshot-cpu-ms")
			if euErr == nil {
				b.ReportMetric(median(euWall), "eu-stack-ms")
				b.ReportMetric(median(euCPU), "eu-stack-cpu-ms")
			}
			if baseline != "" {
				b.ReportMetric(median(baseWall), "baseline-ms")
				b.ReportMetric(median(baseCPU), "baseline-cpu-ms")
			}
		})
	}
}

// median returns the median of v (sorting it), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}
