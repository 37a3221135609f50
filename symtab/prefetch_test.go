package symtab

import (
	"os"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// Prefetch decodes the units of the addresses given on other goroutines
// (before any lookup asks for them), and the lookups that follow answer
// exactly as without it: the C++ target and, when installed, glibc's
// debug file, with its two thousand units (run under -race by make test).
func TestPrefetchSameAnswers(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("Prefetch does nothing on one core")
	}
	targets := map[string]string{"cxxprog": cxxDebug(t, "gz-zlib")}
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err == nil {
		targets["libc"] = libc
	}
	for name, path := range targets {
		t.Run(name, func(t *testing.T) {
			var pcs []uint64
			if name == "libc" {
				for i, f := range runNM(t, path, false, "-D") {
					if i%8 == 0 && isFuncType(f.typ) && f.hasSize && f.size > 0 {
						pcs = append(pcs, f.addr, f.addr+f.size/2)
					}
				}
			} else {
				pcs = funcPCs(t, path, func(string) bool { return true })
			}
			want := resolveAll(t, nil, false, path, pcs)
			s := New(Options{})
			defer s.Close()
			m := openFileModule(t, s, path)
			m.Prefetch(pcs)
			x := m.sources().dw
			if x == nil {
				t.Fatal("no DWARF")
			}
			// Wait for the workers (bounded), then every unit holding a
			// pc must be decoded: no lookup has run yet.
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
				x.pmu.Lock()
				busy := x.pactive > 0
				x.pmu.Unlock()
				if !busy {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("prefetch workers still running after a minute")
				}
			}
			units := 0
			for _, pc := range pcs {
				if cu := x.findCU(pc); cu != nil {
					units++
					if !cu.queued.Load() || cu.dec == nil {
						t.Fatalf("%#x: unit %#x not decoded by Prefetch", pc, cu.off)
					}
				}
			}
			if units == 0 {
				t.Fatal("no pc in a unit")
			}
			for i, pc := range pcs {
				if got := m.Lookup(pc, nil); !reflect.DeepEqual(got, want[i]) {
					t.Fatalf("%#x: got %+v, want %+v", pc, got, want[i])
				}
			}
		})
	}
}
