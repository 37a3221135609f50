//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// BenchmarkFreeze measures what one dump costs a thread that is running:
// a spinning thread (hot.c's spin mode, checking the clock every ~100 µs)
// is dumped `dumps` times during each of its runs, and the largest gap it
// saw in its progress is its freeze (with the scheduler's own noise, which
// the "none" runs, dumped by nobody, measure). Tools alternate run by run:
// stackshot in its default mode and in --mode stop (a running thread is
// stopped in both: its registers cannot be read otherwise), eu-stack
// (which stops every thread), and the build in STACKSHOT_BASELINE. The
// metrics are medians over runs of each run's largest gap.
func BenchmarkFreeze(b *testing.B) {
	bin := buildHot(b)
	const (
		dumps = 8
		every = 60 * time.Millisecond
	)
	secs := (dumps + 2) * every.Seconds()
	type tool struct {
		name string
		argv func(pid int) []string
	}
	tools := []tool{
		{"none", nil},
		{"stackshot", func(pid int) []string { return []string{stackshotBin, fmt.Sprint(pid)} }},
		{"stackshot-stop", func(pid int) []string { return []string{stackshotBin, "--mode", "stop", fmt.Sprint(pid)} }},
	}
	if eu, err := exec.LookPath("eu-stack"); err == nil {
		tools = append(tools, tool{"eu-stack", func(pid int) []string { return []string{eu, "-p", fmt.Sprint(pid)} }})
	}
	if base := os.Getenv("STACKSHOT_BASELINE"); base != "" {
		tools = append(tools, tool{"baseline", func(pid int) []string { return []string{base, fmt.Sprint(pid)} }})
	}
	gaps := make([][]float64, len(tools))
	for i := 0; i < b.N; i++ {
		for k, tl := range tools {
			tg := testutil.Start(b, bin, "spin", "1", fmt.Sprint(secs))
			time.Sleep(every) // (the thread is started and spinning)
			for d := 0; d < dumps && tl.argv != nil; d++ {
				argv := tl.argv(tg.PID)
				if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
					b.Fatalf("%s: %v\n%s", tl.name, err, out)
				}
				time.Sleep(every / 2)
			}
			line, err := tg.ReadLine(time.Duration(secs*float64(time.Second)) + 30*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			var iters, stallUS, cpuUS int64
			if _, err := fmt.Sscanf(line, "iters %d maxstall_us %d cpu_us %d", &iters, &stallUS, &cpuUS); err != nil {
				b.Fatalf("target said %q: %v", line, err)
			}
			gaps[k] = append(gaps[k], float64(stallUS))
		}
	}
	for k, tl := range tools {
		b.ReportMetric(median(gaps[k]), tl.name+"-maxgap-us")
	}
}
