//go:build linux

package otlp

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/output"
	"stackshot/report"
)

// profile64 is what a 10 s record at 99 Hz of a 64-thread process gives
// at most: every thread in 20 distinct stacks 40 frames deep, through a
// main executable and four libraries, with 990 samples per thread.
func profile64() *output.Profile {
	mods := []struct {
		path, id string
		bias     uint64
	}{
		{"/usr/bin/server", "4f1e2d3c4b5a69788796a5b4c3d2e1f001122334", 0x55d0c0a00000},
		{"/usr/lib/x86_64-linux-gnu/libc.so.6", "a1b2c3d4e5f60718293a4b5c6d7e8f9000112233", 0x7f3a1c000000},
		{"/usr/lib/libssl.so.3", "0badc0de0badc0de0badc0de0badc0de0badc0de", 0x7f3a1d000000},
		{"/usr/lib/libz.so.1", "cafef00dcafef00dcafef00dcafef00dcafef00d", 0x7f3a1e000000},
		{"/usr/lib/libstdc++.so.6", "1234567890abcdef1234567890abcdef12345678", 0x7f3a1f000000},
	}
	p := &output.Profile{Start: time.Now(), Duration: 10 * time.Second, FreqHz: 99}
	p.Processes = []output.ProfileProcess{{PID: 1000, Comm: "server", Exe: mods[0].path}}
	for th := range 64 {
		for s := range 20 {
			var fr []report.Frame
			for d := range 40 {
				m := mods[(s+d)%len(mods)]
				fn := (th%8)*400 + s*40 + d // threads in groups share code
				off := uint64(0x1000 + fn*0x40)
				fr = append(fr, report.Frame{PC: m.bias + off, Kind: "user", Function: fmt.Sprintf("ns::Class%d::method%d(int, std::string const&)", fn/40, fn),
					Module: m.path, ModuleOffset: off, HasModule: true, BuildID: m.id,
					File: fmt.Sprintf("/src/server/file%d.cc", fn/40), Line: 10 + d, Method: "cfi"})
			}
			p.Samples = append(p.Samples, output.Sample{PID: 1000, TID: 1000 + th, Thread: fmt.Sprintf("worker-%d", th),
				Frames: fr, Count: 990 / 20})
		}
	}
	return p
}

// BenchmarkSend64Threads: what --otlp adds to a record of a 64-thread
// process: building the OTLP profile, encoding it, and sending it to the
// real Collector on a loopback port until it has answered.
func BenchmarkSend64Threads(b *testing.B) {
	col := testutil.StartCollector(b, testutil.FreeAddr(b), filepath.Join(b.TempDir(), "out.jsonl"))
	set, err := Resolve(col.URL, nil, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	s := mustSender(b, set, "bench", nil)
	p := profile64()
	var size int
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		pd, err := output.ToOTLP(p, output.OTLPOptions{Host: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		body, err := Encode(pd)
		if err != nil {
			b.Fatal(err)
		}
		size = len(body)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Send(ctx, body); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(size), "body-bytes")
	b.ReportMetric(float64(len(p.Samples)), "stacks")
}

// cpuTime is the CPU time (user and system) this process has used: on a
// shared machine, what an operation costs is clearer in it than in wall
// time.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkEncode64Threads: the conversion and encoding alone.
func BenchmarkEncode64Threads(b *testing.B) {
	p := profile64()
	cpu0 := cpuTime()
	for b.Loop() {
		pd, err := output.ToOTLP(p, output.OTLPOptions{Host: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Encode(pd); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
}
