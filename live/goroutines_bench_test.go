//go:build linux

package live

import (
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/ptrace"
	"stackshot/report"
)

// BenchmarkGoroutines10k lists, unwinds and symbolizes the goroutines of a
// Go program with 10,000 goroutines parked in a channel receive: the work
// dump does after the threads run again (open the runtime, read allgs and
// every g, walk every stack with the pclntab's frame sizes, symbolize
// through the resolver). B/op is the memory it allocates.
func BenchmarkGoroutines10k(b *testing.B) {
	have, _ := testutil.GoToolchains()
	for _, v := range []struct {
		name  string
		flags []string
	}{{"plain", nil}, {"stripped", []string{"-ldflags=-s -w"}}} {
		b.Run(v.name, func(b *testing.B) {
			bin := testutil.BuildGo(b, have[0], testutil.Testdata("goruntime", "goroutines"), []string{"CGO_ENABLED=0"}, v.flags...)
			tg := testutil.Start(b, bin, "-park", "10000")
			s := newBenchSession()
			p, err := s.Capture(tg.PID, time.Now().Add(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			rp := s.res.Process(p, ptrace.MemReader{PID: p.MemPID()})
			b.ReportAllocs()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			n := 0
			for i := 0; i < b.N; i++ {
				out := &report.Process{Threads: rp.Threads}
				s.addGoroutines(p, out, time.Time{})
				n = len(out.Goroutines)
				if n < 10000 {
					b.Fatalf("%d goroutines; warnings %v", n, out.Warnings)
				}
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			// CPU time is the figure that holds on a loaded machine.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(n), "goroutines")
		})
	}
}
