package unwind

import (
	"os"
	"testing"
)

// BenchmarkLoadTableLibc measures compiling libc's CFI from its file (page
// cache warm), the one-time cost per module.
func BenchmarkLoadTableLibc(b *testing.B) {
	f, err := os.Open(libcPath)
	skipUnless(b, err == nil, libcPath+" is missing")
	defer f.Close()
	var rows, size int
	for b.Loop() {
		tab, err := LoadTable(f, nil)
		if err != nil {
			b.Fatal(err)
		}
		rows, size = tab.Len(), tab.Size()
	}
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(float64(size), "table-bytes")
}

// BenchmarkTableFind measures one row lookup in libc's table.
func BenchmarkTableFind(b *testing.B) {
	f, err := os.Open(libcPath)
	skipUnless(b, err == nil, libcPath+" is missing")
	defer f.Close()
	tab, err := LoadTable(f, nil)
	if err != nil {
		b.Fatal(err)
	}
	addrs := tab.addrs
	i := 0
	for b.Loop() {
		tab.lookup(addrs[i%len(addrs)] + 1)
		i += 7919
	}
}

// BenchmarkLoadTableLazyLibc is what a one-off dump pays for libc's CFI
// with a lazy table: load it and find the rows of a dozen PCs spread over
// the library (each in its own FDE), against BenchmarkLoadTableLibc's
// whole compile.
func BenchmarkLoadTableLazyLibc(b *testing.B) {
	f, err := os.Open(libcPath)
	skipUnless(b, err == nil, libcPath+" is missing")
	defer f.Close()
	full, err := LoadTable(f, nil)
	if err != nil {
		b.Fatal(err)
	}
	var pcs []uint64
	for i := 1; i <= 12; i++ {
		pcs = append(pcs, full.addrs[i*len(full.addrs)/13]+1)
	}
	for b.Loop() {
		tab, err := LoadTableLazy(nil, f, nil)
		if err != nil || !tab.Lazy() {
			b.Fatal(err, tab.Lazy())
		}
		for _, pc := range pcs {
			tab.Find(pc)
		}
	}
}
