//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/perfsample"
)

// runSpin runs the 8-thread spinning target for secs seconds while
// profiler (nil: none) samples it, and returns its iterations, its
// largest stall between progress checks and the CPU time it had.
func runSpin(b *testing.B, bin string, secs float64, profiler func(pid int) *exec.Cmd) (iters, stallUS, cpuUS int64) {
	return runWorker(b, []string{bin, "spin", "8", fmt.Sprint(secs)}, secs, profiler)
}

// runWorker runs target argv, which works for secs seconds after its
// ready line and then says "iters N maxstall_us S cpu_us C", while
// profiler (nil: none) samples it, and returns N, S and C.
func runWorker(b *testing.B, argv []string, secs float64, profiler func(pid int) *exec.Cmd) (iters, stallUS, cpuUS int64) {
	b.Helper()
	tg := testutil.Start(b, argv[0], argv[1:]...)
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
	if _, err := fmt.Sscanf(line, "iters %d maxstall_us %d cpu_us %d", &iters, &stallUS, &cpuUS); err != nil || cpuUS <= 0 {
		b.Fatalf("target said %q: %v", line, err)
	}
	return iters, stallUS, cpuUS
}

// BenchmarkRecordOverhead measures what `record -F 99` costs its target:
// an 8-thread spinning target's throughput with and without it, and the
// largest stall any of its threads saw; with perf events (the default
// where allowed), with ptrace stops, and beside `perf record -F 99
// --call-graph dwarf` (what stackshot's perf sampling does: registers and
// 8 KiB of stack per sample) and `-g` (frame pointers) where perf works.
// Runs are interleaved to share the machine's noise. Two losses: of
// iterations (what the target did in the time), and of iterations per
// second of the target's own CPU time, which a loaded machine's neighbours
// disturb less (it leaves out the CPU a neighbour took, and with it the
// time a ptrace stop held a thread off the CPU; it keeps what the profiler
// costs inside the target: perf's copy of each sample, caches).
func BenchmarkRecordOverhead(b *testing.B) {
	bin := buildHot(b)
	const secs = 4.0
	dir := b.TempDir()
	stackshot := func(sampler string) func(pid int) *exec.Cmd {
		return func(pid int) *exec.Cmd {
			return exec.Command(stackshotBin, "record", "-q", "-F", "99", "-d", fmt.Sprintf("%gs", secs), "--sampler", sampler,
				"-o", filepath.Join(dir, "s.folded"), fmt.Sprint(pid))
		}
	}
	profilers := perfProfilers(dir, secs)
	profilers["stackshot-ptrace"] = stackshot("ptrace")
	if perfsample.Probe(perfsample.Config{Freq: 99}) == nil {
		profilers["stackshot-perf"] = stackshot("perf")
	}
	measureOverhead(b, profilers, func(pf func(pid int) *exec.Cmd) (int64, int64, int64) { return runSpin(b, bin, secs, pf) })
}

// perfProfilers are `perf record -F 99` of a process for secs seconds,
// by name: perf-fp (--call-graph fp) and perf-dwarf (--call-graph
// dwarf), when perf is there and may record; none otherwise.
func perfProfilers(dir string, secs float64) map[string]func(pid int) *exec.Cmd {
	profilers := map[string]func(pid int) *exec.Cmd{}
	if perf, err := exec.LookPath("perf"); err == nil {
		if exec.Command(perf, "record", "-q", "-F", "99", "-g", "-o", filepath.Join(dir, "probe.data"), "--", "true").Run() == nil {
			for name, cg := range map[string]string{"perf-fp": "fp", "perf-dwarf": "dwarf"} {
				profilers[name] = func(pid int) *exec.Cmd {
					return exec.Command(perf, "record", "-q", "-F", "99", "--call-graph", cg, "-o", filepath.Join(dir, name+".data"),
						"-p", fmt.Sprint(pid), "--", "sleep", fmt.Sprint(secs))
				}
			}
		}
	}
	return profilers
}

// measureOverhead runs the target (run: with a profiler, or nil for none)
// alone and under each of profilers, in interleaved rounds, and reports
// the medians of each profiler's losses and stalls (see
// BenchmarkRecordOverhead).
func measureOverhead(b *testing.B, profilers map[string]func(pid int) *exec.Cmd, run func(pf func(pid int) *exec.Cmd) (iters, stallUS, cpuUS int64)) {
	// Interleaved rounds; medians, so one noisy neighbour moment does not
	// decide the result.
	const rounds = 5
	res := map[string][]float64{}
	cpuRes := map[string][]float64{}
	stalls := map[string][]float64{}
	for i := 0; i < b.N*rounds; i++ {
		base, baseStall, baseCPU := run(nil)
		stalls["base"] = append(stalls["base"], float64(baseStall))
		for name, pf := range profilers {
			it, stall, cpu := run(pf)
			loss := 100 * (1 - float64(it)/float64(base))
			cpuLoss := 100 * (1 - (float64(it)/float64(cpu))/(float64(base)/float64(baseCPU)))
			res[name] = append(res[name], loss)
			cpuRes[name] = append(cpuRes[name], cpuLoss)
			stalls[name] = append(stalls[name], float64(stall))
			b.Logf("%s: %d iterations vs %d alone (%.2f%% loss; per CPU second %.2f%%), max stall %dus vs %dus alone",
				name, it, base, loss, cpuLoss, stall, baseStall)
		}
	}
	median := func(v []float64) float64 {
		sort.Float64s(v)
		return v[len(v)/2]
	}
	b.ReportMetric(median(stalls["base"]), "base-maxstall-us")
	for name := range profilers {
		b.ReportMetric(median(res[name]), name+"-loss-%")
		b.ReportMetric(median(cpuRes[name]), name+"-cpuloss-%")
		b.ReportMetric(median(stalls[name]), name+"-maxstall-us")
	}
}

// BenchmarkRecordRate measures how many of the samples asked for `record
// -F 99` delivers for each thread of a process with more busy threads than
// cores (8 spinning threads; the machine has 2 cores): with perf events
// and with ptrace stops, interleaved. A thread's rate is its samples over
// F x the recording's duration; the metrics are the worst thread's, in
// percent, and the ticks achieved per second.
func BenchmarkRecordRate(b *testing.B) {
	bin := buildHot(b)
	const secs = 4.0
	dir := b.TempDir()
	samplers := []string{"ptrace"}
	if perfsample.Probe(perfsample.Config{Freq: 99}) == nil {
		samplers = append(samplers, "perf")
	}
	worst := map[string][]float64{}
	hz := map[string][]float64{}
	for i := 0; i < b.N*2; i++ {
		for _, smp := range samplers {
			out := filepath.Join(dir, smp+".json")
			runSpin(b, bin, secs+3, func(pid int) *exec.Cmd { // (outlives the recording)
				return exec.Command(stackshotBin, "record", "-q", "-F", "99", "-d", fmt.Sprintf("%gs", secs), "--sampler", smp,
					"-o", out, fmt.Sprint(pid))
			})
			data, err := os.ReadFile(out)
			if err != nil {
				b.Fatal(err)
			}
			var prof struct {
				DurationNS int64 `json:"duration_ns"`
				Stats      struct {
					AchievedHz float64 `json:"achieved_hz"`
				} `json:"stats"`
				Stacks []struct {
					Thread string `json:"thread"`
					Count  int64  `json:"count"`
				} `json:"stacks"`
			}
			if err := json.Unmarshal(data, &prof); err != nil {
				b.Fatal(err)
			}
			per := map[string]int64{}
			for _, st := range prof.Stacks {
				if strings.HasPrefix(st.Thread, "spin-") {
					per[st.Thread] += st.Count
				}
			}
			asked := 99 * float64(prof.DurationNS) / 1e9
			w := 100.0
			for k := range 8 {
				w = min(w, 100*float64(per[fmt.Sprintf("spin-%d", k)])/asked)
			}
			worst[smp] = append(worst[smp], w)
			hz[smp] = append(hz[smp], prof.Stats.AchievedHz)
			b.Logf("%s: %.1f Hz of 99; per thread %v of %.0f asked (worst %.1f%%)", smp, prof.Stats.AchievedHz, per, asked, w)
		}
	}
	median := func(v []float64) float64 {
		sort.Float64s(v)
		return v[len(v)/2]
	}
	for _, smp := range samplers {
		b.ReportMetric(median(worst[smp]), smp+"-worst-thread-%")
		b.ReportMetric(median(hz[smp]), smp+"-Hz")
	}
}
