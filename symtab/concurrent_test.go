package symtab

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentLookups resolves the same pcs from several goroutines on a
// fresh module (so units are decoded and names demangled concurrently) and
// expects what a sequential pass on another Symbolizer gives. Run with
// -race to check the lazy loading.
func TestConcurrentLookups(t *testing.T) {
	bin := cxxDebug(t, "dwarf5")
	pcs := funcPCs(t, bin, func(string) bool { return true })
	ref := New(Options{})
	defer ref.Close()
	rm := openFileModule(t, ref, bin)
	want := make([][]Sym, len(pcs))
	for i, pc := range pcs {
		want[i] = rm.Lookup(pc, nil)
	}
	s := New(Options{})
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			m, err := s.Module(ModuleRef{Path: bin})
			if err != nil {
				errs <- err.Error()
				return
			}
			var buf []Sym
			for k := range pcs {
				i := (k*(g+1)*7 + g) % len(pcs)
				buf = m.lookupUncached(pcs[i], buf[:0])
				if !symsEqual(buf, want[i]) {
					errs <- fmt.Sprintf("uncached lookup of %#x: %v, want %v", pcs[i], buf, want[i])
					return
				}
				buf = m.Lookup(pcs[i], buf[:0])
				if !symsEqual(buf, want[i]) {
					errs <- fmt.Sprintf("lookup of %#x: %v, want %v", pcs[i], buf, want[i])
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func symsEqual(a, b []Sym) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
