package symtab

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// The benchmarks symbolize 10 000 distinct pcs of a large binary, cold (a
// new Symbolizer each time: open, index, decode) and warm, and time
// `addr2line -f -i -e` (binutils) on the same pcs for comparison:
//
//	go test -run XXX -bench . -benchtime 3x ./symtab/
//
// Targets: the Go toolchain's own go binary (no DWARF: .gopclntab and
// .symtab) and cmd/go rebuilt with DWARF (compressed, with inlined
// subroutines; the first build takes minutes, later ones hit the cache).
//
// Measured on the 2-core dev machine (-benchtime 2s, shared with others):
//
//	go release  cold 46 ms (4.6 us/pc)  warm 26 ns, 1.4 us without the result cache  addr2line 695 ms
//	go + DWARF  cold 413 ms (41 us/pc)  warm 31 ns, 0.63 us without the result cache addr2line 759 ms
const benchPCCount = 10000

type benchTarget struct{ name, path string }

func benchTargets(b *testing.B) []benchTarget {
	skipWithout(b, "go", "nm", "addr2line")
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatal(err)
	}
	release := filepath.Join(string(bytes.TrimSpace(goroot)), "bin", "go")
	dw := artifact(b, "go-dwarf", sh("go build -o $OUT cmd/go"))
	return []benchTarget{{"go-release", release}, {"go-dwarf", dw}}
}

var benchPCCache = map[string][]uint64{}

// benchPCs spreads n distinct pcs over the sized functions nm lists.
func benchPCs(b *testing.B, file string) []uint64 {
	if pcs := benchPCCache[file]; pcs != nil {
		return pcs
	}
	var fns []nmSym
	for _, s := range runNM(b, file, false) {
		if isFuncType(s.typ) && s.hasSize && s.size > 0 {
			fns = append(fns, s)
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].addr < fns[j].addr })
	if len(fns) < 1000 {
		b.Fatalf("%s: only %d functions", file, len(fns))
	}
	seen := map[uint64]bool{}
	var pcs []uint64
	for i := 0; len(pcs) < benchPCCount && i < 100*benchPCCount; i++ {
		f := fns[(i*7919)%len(fns)]
		pc := f.addr + uint64(i*31)%f.size
		if !seen[pc] {
			seen[pc] = true
			pcs = append(pcs, pc)
		}
	}
	benchPCCache[file] = pcs
	return pcs
}

func BenchmarkSymbolize(b *testing.B) {
	for _, tg := range benchTargets(b) {
		pcs := benchPCs(b, tg.path)
		b.Run(tg.name+"/cold", func(b *testing.B) {
			buf := make([]Sym, 0, 16)
			for b.Loop() {
				s := New(Options{})
				m, err := s.Module(ModuleRef{Path: tg.path})
				if err != nil {
					b.Fatal(err)
				}
				for _, pc := range pcs {
					buf = m.Lookup(pc, buf[:0])
				}
				s.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pcs)), "ns/pc")
		})
		s := New(Options{})
		m, err := s.Module(ModuleRef{Path: tg.path})
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]Sym, 0, 16)
		for _, pc := range pcs {
			buf = m.Lookup(pc, buf[:0])
		}
		b.Run(tg.name+"/warm", func(b *testing.B) {
			i := 0
			for b.Loop() {
				buf = m.Lookup(pcs[i%len(pcs)], buf[:0])
				i++
			}
		})
		b.Run(tg.name+"/warm-no-result-cache", func(b *testing.B) {
			i := 0
			for b.Loop() {
				buf = m.lookupUncached(pcs[i%len(pcs)], buf[:0])
				i++
			}
		})
		s.Close()
		b.Run(tg.name+"/addr2line", func(b *testing.B) {
			var in bytes.Buffer
			for _, pc := range pcs {
				fmt.Fprintf(&in, "%#x\n", pc)
			}
			for b.Loop() {
				cmd := exec.Command("addr2line", "-f", "-i", "-e", tg.path)
				cmd.Stdin = bytes.NewReader(in.Bytes())
				cmd.Stderr = os.Stderr
				if _, err := cmd.Output(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pcs)), "ns/pc")
		})
	}
}

// BenchmarkLibcFirstLookup is what a one-off dump pays for libc: a new
// Symbolizer, the module opened, its symbol sources loaded (the separate
// debug file's .symtab and .dynsym; DWARF too unless names-only), and one
// lookup. Skipped without the system's libc.
func BenchmarkLibcFirstLookup(b *testing.B) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		b.Skipf("no %s on this machine", libc)
	}
	pc := uint64(0)
	for _, s := range runNM(b, libc, false, "-D") {
		if isFuncType(s.typ) && s.size > 0 {
			pc = s.addr + s.size/2
			break
		}
	}
	for _, namesOnly := range []bool{true, false} {
		name := "names-only"
		if !namesOnly {
			name = "dwarf"
		}
		b.Run(name, func(b *testing.B) {
			buf := make([]Sym, 0, 16)
			for b.Loop() {
				s := New(Options{NamesOnly: namesOnly})
				m, err := s.Module(ModuleRef{Path: libc})
				if err != nil {
					b.Fatal(err)
				}
				if buf = m.Lookup(pc, buf[:0]); len(buf) == 0 || buf[0].Function == "" {
					b.Fatalf("%#x: no name", pc)
				}
				s.Close()
			}
		})
	}
}
