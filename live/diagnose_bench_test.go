//go:build linux

package live

import (
	"bytes"
	"testing"
	"time"

	"stackshot/diagnose"
	"stackshot/internal/testutil"
	"stackshot/output"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
)

// BenchmarkDiagnose measures what the diagnosis (lock owners, deadlocks,
// grouping, verdict) adds to a text dump of a 512-thread process: "dump"
// is capture + unwind + symbolize + text, "dump+diagnose" the same with
// the diagnosis; the ratio is the overhead (goal: under 5%); "diagnose-only"
// is the diagnosis by itself. The workers
// wait on a condition variable, and main's mutex is read too.
func BenchmarkDiagnose(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, bin, "512")
	s := newBenchSession()
	for _, diag := range []bool{false, true} {
		name := "dump"
		if diag {
			name = "dump+diagnose"
		}
		b.Run(name, func(b *testing.B) {
			var buf bytes.Buffer
			for i := 0; i < b.N; i++ {
				p, err := s.Capture(tg.PID, time.Now().Add(10*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				rp := s.res.Process(p, ptrace.MemReader{PID: p.MemPID()})
				if diag {
					s.diagnose(rp, p, procmaps.TaskSet(p.PID))
				}
				buf.Reset()
				output.Text(&buf, []*report.Process{rp}, output.TextOptions{})
			}
		})
	}
	// The diagnosis alone, on one resolved snapshot: less noisy than the
	// difference of two whole dumps on a shared machine.
	b.Run("diagnose-only", func(b *testing.B) {
		p, err := s.Capture(tg.PID, time.Now().Add(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		rp := s.res.Process(p, ptrace.MemReader{PID: p.MemPID()})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s.diagnose(rp, p, procmaps.TaskSet(p.PID))
		}
	})
}

// BenchmarkNameFDs measures naming the descriptors of 512 threads blocked
// in read(2) on one pipe (the part of the diagnosis that reads /proc per
// blocked thread), against the dump of the same process.
func BenchmarkNameFDs(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "waits.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, bin, "readers", "512")
	s := newBenchSession()
	b.Run("dump", func(b *testing.B) {
		var buf bytes.Buffer
		for i := 0; i < b.N; i++ {
			p, err := s.Capture(tg.PID, time.Now().Add(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			rp := s.res.Process(p, ptrace.MemReader{PID: p.MemPID()})
			buf.Reset()
			output.Text(&buf, []*report.Process{rp}, output.TextOptions{})
		}
	})
	b.Run("name-fds", func(b *testing.B) {
		p, err := s.Capture(tg.PID, time.Now().Add(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		rp := s.res.Process(p, ptrace.MemReader{PID: p.MemPID()})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			diagnose.NameFDs(rp, procmaps.NewFDReader(p.PID), ptrace.MemReader{PID: p.MemPID()})
		}
		if rp.Threads[1].FDWait == nil {
			b.Fatal("no descriptor named")
		}
	})
}
