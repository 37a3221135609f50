package output

import (
	"fmt"
	"io"
	"math/rand/v2"
	"stackshot/report"
	"testing"
	"time"
)

// benchProfile is a profile of n unique stacks, 8 to 40 frames deep, drawn
// from 2000 functions in three modules plus the kernel, with inlined frames,
// as a long recording of a busy 64-thread server would give.
func benchProfile(n int) *Profile {
	r := rand.New(rand.NewPCG(1, 2))
	type fn struct {
		name   string
		module string
		base   uint64
		off    uint64
		kernel bool
	}
	mods := []string{"/usr/sbin/server", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/libssl.so.3"}
	bases := []uint64{0x55d0c0a00000, 0x7f3a1c000000, 0x7f3a1e000000}
	funcs := make([]fn, 2000)
	for i := range funcs {
		m := i % 3
		funcs[i] = fn{name: fmt.Sprintf("ns%d::Class%d::method%d(int, std::string const&)", i%17, i%101, i),
			module: mods[m], base: bases[m], off: 0x1000 + uint64(i)*0x40}
		if i%50 == 0 {
			funcs[i].kernel = true
			funcs[i].name = fmt.Sprintf("kfunc_%d", i)
		}
	}
	p := &Profile{Start: time.Unix(1_790_000_000, 0), Duration: 10 * time.Minute, FreqHz: 99,
		Processes: []ProfileProcess{{PID: 1000, Comm: "server", Exe: mods[0]}}}
	for i := 0; i < n; i++ {
		depth := 8 + r.IntN(33)
		frames := make([]report.Frame, 0, depth+3)
		if r.IntN(4) == 0 {
			for k := 0; k < 3; k++ {
				f := funcs[50*r.IntN(40)]
				frames = append(frames, report.Frame{PC: 0xffffffff81000000 + f.off, Kind: "kernel", Function: f.name, Method: "kernel"})
			}
		}
		for d := 0; d < depth; d++ {
			// Shallow frames come from few functions, deep ones from many,
			// so stacks share their roots as real ones do.
			f := funcs[r.IntN(min(2000, 3+d*d*3))]
			if f.kernel {
				f = funcs[1]
			}
			pc := f.base + f.off + uint64(r.IntN(16))
			fr := report.Frame{PC: pc, Kind: "user", Function: f.name, HasOffset: true, Offset: pc - f.base - f.off,
				Module: f.module, HasModule: true, ModuleOffset: pc - f.base, BuildID: "0011223344556677",
				File: "/src/server/file.cc", Line: 10 + d, Method: "cfi"}
			if r.IntN(8) == 0 {
				in := fr
				in.Function, in.Inlined, in.HasOffset, in.Offset = "inline_helper_"+f.name, true, false, 0
				frames = append(frames, in)
			}
			frames = append(frames, fr)
		}
		// Reverse the user part so frame 0 is the deepest (innermost first).
		tid := 1000 + r.IntN(64)
		p.Samples = append(p.Samples, Sample{PID: 1000, TID: tid, Thread: fmt.Sprintf("worker-%d", tid%64),
			Frames: frames, Count: 1 + int64(r.IntN(100))})
	}
	return p
}

func benchWriter(b *testing.B, write func(io.Writer, *Profile) error) {
	p := benchProfile(10000)
	cw := &countingWriter{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cw.n = 0
		if err := write(cw, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cw.n), "bytes/op-out")
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(b []byte) (int, error) { c.n += int64(len(b)); return len(b), nil }

func BenchmarkWritePprof10k(b *testing.B)  { benchWriter(b, WritePprof) }
func BenchmarkWriteSVG10k(b *testing.B)    { benchWriter(b, WriteSVG) }
func BenchmarkWriteFolded10k(b *testing.B) { benchWriter(b, WriteFolded) }
func BenchmarkWriteJSON10k(b *testing.B)   { benchWriter(b, WriteProfileJSON) }
func BenchmarkWriteText10k(b *testing.B) {
	benchWriter(b, func(w io.Writer, p *Profile) error { return WriteProfileText(w, p, 20) })
}
