//go:build linux

package pyruntime

import (
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
)

// BenchmarkLiveThreads: what reading a 50-thread CPython 3.11 process's
// Python frames costs (each thread 10 calls deep, in time.sleep), the
// part of a dump --no-python leaves out besides the placing.
func BenchmarkLiveThreads(b *testing.B) {
	py := testutil.Need(b, "/usr/bin/python3.11")
	tg := testutil.Start(b, py, testutil.Testdata("python", "many.py"), "50")
	maps, err := procmaps.ReadMaps(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := OpenLive(tg.PID, Candidates(py, maps, nil), ptrace.MemReader{PID: tg.PID})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ths, err := rt.Threads()
		if err != nil || len(ths) != 50 {
			b.Fatalf("%d threads, %v", len(ths), err)
		}
	}
}
