//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// runSpin runs the 8-thread spinning target for secs seconds while
// profiler (nil: none) samples it, and returns its iterations and its
// largest stall between progress checks.
func runSpin(b *testing.B, bin string, secs float64, profiler func(pid int) *exec.Cmd) (iters, stallUS int64) {
	b.Helper()
	tg := testutil.Start(b, bin, "spin", "8", fmt.Sprint(secs))
	var prof *exec.Cmd
	if profiler != nil {
		prof = profiler(tg.PID)
		if err := prof.Start(); err != nil {
			b.Fatal(err)
		}
	}
	line, err := tg.ReadLine(time.Duration(secs*float64(time.Second)) + 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if prof != nil {
		prof.Wait()
	}
	if _, err := fmt.Sscanf(line, "iters %d maxstall_us %d", &iters, &stallUS); err != nil {
		b.Fatalf("target said %q: %v", line, err)
	}
	return iters, stallUS
}

// BenchmarkRecordOverhead measures what `record -F 99` costs its target:
// an 8-thread spinning target's throughput with and without it, and the
// largest stall any of its threads saw; the same with `perf record -F 99 -g`
// where perf works. Runs are interleaved to share the machine's noise.
func BenchmarkRecordOverhead(b *testing.B) {
	bin := buildHot(b)
	const secs = 4.0
	dir := b.TempDir()
	profilers := map[string]func(pid int) *exec.Cmd{
		"stackshot": func(pid int) *exec.Cmd {
			return exec.Command(stackshotBin, "record", "-q", "-F", "99", "-d", fmt.Sprintf("%gs", secs), "-o", filepath.Join(dir, "s.folded"), fmt.Sprint(pid))
		},
	}
	if perf, err := exec.LookPath("perf"); err == nil {
		if exec.Command(perf, "record", "-q", "-F", "99", "-g", "-o", filepath.Join(dir, "probe.data"), "--", "true").Run() == nil {
			profilers["perf"] = func(pid int) *exec.Cmd {
				return exec.Command(perf, "record", "-q", "-F", "99", "-g", "-o", filepath.Join(dir, "perf.data"), "-p", fmt.Sprint(pid), "--", "sleep", fmt.Sprint(secs))
			}
		}
	}
	// Interleaved rounds; medians, so one noisy neighbour moment does not
	// decide the result.
	const rounds = 3
	res := map[string][]float64{}
	stalls := map[string][]float64{}
	for i := 0; i < b.N*rounds; i++ {
		base, baseStall := runSpin(b, bin, secs, nil)
		stalls["base"] = append(stalls["base"], float64(baseStall))
		for name, pf := range profilers {
			it, stall := runSpin(b, bin, secs, pf)
			loss := 100 * (1 - float64(it)/float64(base))
			res[name] = append(res[name], loss)
			stalls[name] = append(stalls[name], float64(stall))
			b.Logf("%s: %d iterations vs %d alone (%.2f%% loss), max stall %dus vs %dus alone",
				name, it, base, loss, stall, baseStall)
		}
	}
	median := func(v []float64) float64 {
		sort.Float64s(v)
		return v[len(v)/2]
	}
	b.ReportMetric(median(stalls["base"]), "base-maxstall-us")
	for name := range profilers {
		b.ReportMetric(median(res[name]), name+"-loss-%")
		b.ReportMetric(median(stalls[name]), name+"-maxstall-us")
	}
}
