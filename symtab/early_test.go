package symtab

import (
	"debug/dwarf"
	"os"
	"reflect"
	"runtime"
	"testing"
)

// libcPCs returns addresses in glibc's exported functions (every 8th),
// skipping the test without glibc's debug file (libc6-dbg: compressed
// DWARF, 5.8 MB of .debug_info).
func libcPCs(t *testing.T) (string, []uint64) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skip("no glibc")
	}
	var pcs []uint64
	for i, f := range runNM(t, libc, false, "-D") {
		if i%8 == 0 && isFuncType(f.typ) && f.hasSize && f.size > 0 {
			pcs = append(pcs, f.addr, f.addr+f.size/2)
		}
	}
	earlyWaitForTests = true
	t.Cleanup(func() { earlyWaitForTests = false })
	return libc, pcs
}

// The units a first Prefetch asks for are decoded while .debug_info is
// still being decompressed, and the lookups answer exactly as without
// (run under -race by make test).
func TestEarlyUnitsSameAnswers(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("Prefetch does nothing on one core")
	}
	libc, pcs := libcPCs(t)
	want := resolveAll(t, nil, false, libc, pcs)
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, libc)
	m.Prefetch(pcs)
	x := m.sources().dw
	if x == nil || x.file == m.file {
		t.Skip("no separate debug file for glibc")
	}
	if x.early == nil {
		t.Fatal("no early decoding")
	}
	x.early.mu.Lock()
	n := len(x.early.units)
	x.early.mu.Unlock()
	if n == 0 {
		t.Fatal("no unit decoded early")
	}
	t.Logf("%d units decoded early", n)
	for i, pc := range pcs {
		if got := m.Lookup(pc, nil); !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("%#x: got %+v, want %+v", pc, got, want[i])
		}
	}
}

// An early unit whose bytes or header are not the whole section's is not
// taken: it is decoded again.
func TestEarlyUnitRefused(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("Prefetch does nothing on one core")
	}
	libc, pcs := libcPCs(t)
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, libc)
	m.firstPC.Store(&pcs) // as Prefetch does, without its workers
	x := m.sources().dw
	if x == nil || x.early == nil {
		t.Skip("no early decoding (no separate compressed debug file)")
	}
	var some *earlyUnit
	var off uint64
	x.early.mu.Lock()
	for o, eu := range x.early.units {
		some, off = eu, uint64(o)
		break
	}
	x.early.mu.Unlock()
	if some == nil {
		t.Fatal("no unit decoded early")
	}
	<-some.done
	good := some.info
	some.info = append([]byte(nil), good...)
	some.info[len(some.info)-1] ^= 1
	if _, ok := x.early.take(x, dwarf.Offset(off)); ok {
		t.Fatal("took an early unit whose bytes differ")
	}
	some.info, some.h.vers = good, some.h.vers+1
	if _, ok := x.early.take(x, dwarf.Offset(off)); ok {
		t.Fatal("took an early unit whose header differs")
	}
	some.info, some.h.vers = good, some.h.vers-1
	if _, ok := x.early.take(x, dwarf.Offset(off)); !ok {
		t.Fatal("refused the early unit as it was")
	}
}
