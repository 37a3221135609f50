package symtab

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// fuzzSeedBinaries adds the test targets (built at fuzz start when the
// toolchain is there) to a fuzz corpus; the committed corpus under
// testdata/fuzz holds small hand-made inputs.
func fuzzSeedBinaries(f *testing.F, add func(path string)) {
	if _, err := os.Stat("/usr/bin/gcc"); err != nil {
		return
	}
	for _, p := range []string{
		artifact(f, "fuzzseed-tiny", []string{"gcc", "-O1", "-g", "-nostdlib", "-static", "-Wl,--build-id", "-o", "$OUT", "$SRC/tiny.c"}),
		artifact(f, "fuzzseed-tiny-gz", []string{"gcc", "-O1", "-g", "-gz=zlib", "-nostdlib", "-static", "-Wl,--build-id", "-o", "$OUT", "$SRC/tiny.c"}),
		artifact(f, "fuzzseed-tiny-dwarf4", []string{"gcc", "-O1", "-gdwarf-4", "-nostdlib", "-static", "-Wl,--build-id", "-o", "$OUT", "$SRC/tiny.c"}),
	} {
		add(p)
	}
}

// exercise runs every entry point of a module on hostile input.
func exercise(m *Module) {
	// The first addresses, as a first Prefetch gives them: their units
	// are decoded early (earlyUnits) while the DWARF loads.
	var pcs []uint64
	for _, l := range m.loads {
		pcs = append(pcs, l.vaddr, l.vaddr+l.memsz/2)
	}
	m.firstPC.Store(&pcs)
	earlyWaitForTests = true
	defer func() { earlyWaitForTests = false }()
	m.SymbolSources()
	m.DebugELF()
	for _, l := range m.loads {
		m.FileOffsetToVaddr(l.off)
		for _, a := range []uint64{l.vaddr, l.vaddr + l.memsz/2, l.vaddr + l.memsz - 1} {
			m.Lookup(a, nil)
		}
	}
	if src := m.sources(); src.syms != nil {
		for i := 0; i < src.syms.count && i < 64; i++ {
			m.Lookup(src.syms.addr[i], nil)
		}
	}
}

// FuzzELF feeds ELF images as arbitrary bytes: headers, notes, symbol
// tables, MiniDebugInfo, DWARF, pclntab and the build id from "memory".
// An input is a patch of at most 256 bytes written over one of the seed
// binaries (which) at offset off (testutil.Patched): whole binaries as inputs, a
// few KiB each, left the fuzzer minimising for most of its time (15
// counted executions in 10 s).
func FuzzELF(f *testing.F) {
	seeds := fuzzSeedImages(f)
	var work []byte
	f.Fuzz(func(t *testing.T, which uint8, off uint32, patch []byte) {
		if len(patch) > 256 || len(seeds) == 0 {
			return
		}
		work = testutil.Patched(work, seeds[int(which)%len(seeds)], off, patch)
		BuildIDFromMemory(bytes.NewReader(work), 0)
		s := New(Options{})
		m, err := s.ModuleFromImage(work, "fuzz")
		if err != nil {
			return
		}
		exercise(m)
	})
}

// fuzzSeedImages reads the seed binaries (fuzzSeedBinaries) and adds, for
// each, the patches FuzzELF and FuzzFileBuildID start from: none, and the
// ELF header and the first headers after it as they are.
func fuzzSeedImages(f *testing.F) [][]byte {
	var seeds [][]byte
	fuzzSeedBinaries(f, func(p string) {
		if b, err := os.ReadFile(p); err == nil && len(b) >= 0x80 {
			seeds = append(seeds, b)
		}
	})
	for i, b := range seeds {
		f.Add(uint8(i), uint32(0), []byte{})
		f.Add(uint8(i), uint32(0x40), bytes.Clone(b[0x40:0x80]))
	}
	return seeds
}

// FuzzLines feeds arbitrary DWARF sections (abbrev, info, line, str,
// aranges): unit headers, the line program, the DIE tree and the lookup.
func FuzzLines(f *testing.F) {
	fuzzSeedBinaries(f, func(p string) {
		ef, err := elf.Open(p)
		if err != nil {
			return
		}
		defer ef.Close()
		get := func(n string) []byte {
			if s := ef.Section(n); s != nil {
				b, _ := s.Data()
				return b
			}
			return nil
		}
		f.Add(get(".debug_abbrev"), get(".debug_info"), get(".debug_line"), get(".debug_str"), get(".debug_aranges"), get(".debug_line_str"))
	})
	f.Fuzz(func(t *testing.T, abbrev, info, line, str, aranges, lineStr []byte) {
		info = append([]byte(nil), info...) // dataFor patches it for a moment
		x := &dwarfIndex{order: binary.LittleEndian}
		err := safely("fuzz", func() error {
			// Half the inputs through per-unit views (dataFor), half
			// through one view of the whole section.
			if len(info)%2 == 0 {
				d, err := dwarf.New(abbrev, nil, nil, info, line, nil, nil, str)
				if err != nil {
					return err
				}
				d.AddSection(".debug_line_str", lineStr)
				x.d = d
			}
			if err := x.setSections(map[string][]byte{"info": info, "abbrev": abbrev, "line": line,
				"str": str, "aranges": aranges, "line_str": lineStr}); err != nil {
				return err
			}
			return x.buildIndex(info, aranges)
		})
		if err != nil {
			return
		}
		for i, cu := range x.cus {
			if i >= 32 {
				break
			}
			dec := x.unit(cu)
			for k, r := range dec.rows {
				if k >= 256 {
					break
				}
				x.lookup(r.addr, nil, true)
			}
			for k, fr := range dec.funcs {
				if k >= 256 {
					break
				}
				x.lookup(fr.lo, nil, true)
			}
		}
		for _, r := range x.rng {
			x.lookup(r.lo, nil, true)
		}
	})
}

// TestFuzzCrashers keeps inputs that once broke the parsers as ordinary
// tests (each must simply not panic or hang).
func TestFuzzCrashers(t *testing.T) {
	inputs := [][]byte{
		nil,
		[]byte("\x7fELF"),
		// ELF64 header claiming 0xffff program headers at a huge offset.
		append([]byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00\x3e\x00\x01\x00\x00\x00"),
			bytes.Repeat([]byte{0xff}, 40)...),
	}
	for _, in := range inputs {
		BuildIDFromMemory(bytes.NewReader(in), 0)
		if m, err := New(Options{}).ModuleFromImage(in, "crasher"); err == nil {
			exercise(m)
		}
	}
	// A pclntab header whose function count exceeds the table.
	bad := make([]byte, 64)
	binary.LittleEndian.PutUint32(bad, 0xfffffff1)
	bad[6], bad[7] = 1, 8
	binary.LittleEndian.PutUint64(bad[8:], 1<<40)
	if err := checkPclntabHeader(bad, binary.LittleEndian); err == nil {
		t.Error("pclntab header with 2^40 functions accepted")
	}
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seeds in testdata/fuzz from tiny.c")

// TestUpdateFuzzSeeds rewrites testdata/fuzz/{FuzzELF,FuzzLines}/tiny-*
// when run with -update-seeds: tiny.c built small (-Wl,-N, no .comment) so
// the committed seeds stay a few KiB; and FuzzGoPclntab/synthetic, the
// hand-laid table of TestGoInlineSynthetic.
func TestUpdateFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("rewrites the seed corpus only with -update-seeds")
	}
	for _, v := range []struct{ name, flags string }{
		{"dwarf5", "-gdwarf-5"}, {"dwarf4", "-gdwarf-4"}, {"gz", "-gdwarf-5 -gz=zlib"},
	} {
		bin := artifact(t, "seed-"+v.name, sh("gcc -O1 "+v.flags+" -nostdlib -static -fno-asynchronous-unwind-tables -Wl,-N -Wl,--build-id -o $OUT $SRC/tiny.c && objcopy -R .comment -R .note.gnu.property $OUT"))
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		writeSeed(t, "FuzzELF", "tiny-"+v.name, b)
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		get := func(n string) []byte {
			if s := ef.Section(n); s != nil {
				d, _ := s.Data()
				return d
			}
			return []byte{}
		}
		writeSeed(t, "FuzzLines", "tiny-"+v.name, get(".debug_abbrev"), get(".debug_info"), get(".debug_line"), get(".debug_str"), get(".debug_aranges"), get(".debug_line_str"))
	}
	writeSeed(t, "FuzzGoPclntab", "synthetic", syntheticPclntab())
}

func writeSeed(t *testing.T, fuzz, name string, args ...[]byte) {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(a)))
	}
	dir := filepath.Join("testdata", "fuzz", fuzz)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzGoPclntab feeds arbitrary bytes as a Go 1.20+ pclntab to the direct
// reader (function table, pc-value tables, inline trees). The inline tree
// is read through a fake file that maps the same bytes at gofunc.
func FuzzGoPclntab(f *testing.F) {
	if _, err := exec.LookPath("go"); err == nil {
		bin := artifact(f, "goprog-sw", sh(`cd $SRC/goprog && go build -ldflags="-s -w" -o $OUT .`))
		if ef, err := elf.Open(bin); err == nil {
			if s := ef.Section(".gopclntab"); s != nil {
				if b, err := s.Data(); err == nil {
					f.Add(b)
				}
			}
			ef.Close()
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const base = 0x10000
		file := &openFile{r: bytes.NewReader(data), size: int64(len(data))}
		g := newGoInlineLoads(data, binary.LittleEndian, 0x401000, base, file, []loadSeg{{off: 0, filesz: uint64(len(data)), vaddr: base, memsz: uint64(len(data))}})
		if g == nil {
			return
		}
		for i := 0; i < g.nfunc && i < 64; i++ {
			e, ok := g.u32(g.pcln, uint64(i)*8)
			if !ok {
				break
			}
			for _, d := range []uint64{0, 1, 7, 64} {
				g.lookup(g.text+uint64(e)+d, nil)
			}
		}
	})
}
