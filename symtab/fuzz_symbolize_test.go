package symtab

import (
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"stackshot/internal/testutil"
	"testing"
)

// Budgets of FuzzSymbolizeELF: small, so that an input that gets past
// them shows as a ceiling failure rather than as a slow fuzzer.
const (
	fuzzDebugBytes   = 16 << 20
	fuzzSectionBytes = 4 << 20
	fuzzAllocCeiling = 512 << 20 // bytes allocated, in all, for one input
)

// symbolizeUnderCeiling loads data as a module file (written in dir)
// through the whole symbolizer (opening by path, header checks, build id,
// debug-file search, DWARF, symbol tables, MiniDebugInfo, pclntab,
// lookups) under a memory ceiling: what one input makes the symbolizer
// allocate, in all, must stay under fuzzAllocCeiling, whatever sizes its
// headers claim.
func symbolizeUnderCeiling(t *testing.T, dir string, data []byte) {
	p := filepath.Join(dir, "input.elf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := New(Options{MaxDebugBytes: fuzzDebugBytes, MaxSectionBytes: fuzzSectionBytes})
	if m, err := s.Module(ModuleRef{Path: p}); err == nil {
		exercise(m)
		m.Lookup(testutil.BombFuncAddr+0x10, nil)
	}
	if u := s.BudgetUsed(); u > fuzzDebugBytes {
		t.Errorf("budget overdrawn: %d of %d bytes", u, fuzzDebugBytes)
	}
	s.Close()
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > fuzzAllocCeiling {
		t.Errorf("one input allocated %d MiB, ceiling %d MiB", n>>20, fuzzAllocCeiling>>20)
	}
}

// The bombs (smallBombs, committed in testdata/fuzz/FuzzSymbolizeELF as
// the fuzz corpus format quotes them, and the 3 GiB section-name bomb)
// each go through the whole symbolizer under the ceiling, whole.
func TestSymbolizeBombs(t *testing.T) {
	dir := t.TempDir()
	bombs := smallBombs()
	bombs["shstrtab-bomb"] = testutil.ShstrtabBomb()
	for name, b := range bombs {
		t.Run(name, func(t *testing.T) { symbolizeUnderCeiling(t, dir, b) })
	}
}

// FuzzSymbolizeELF: the bombs of smallBombs, one of them (which) with a
// patch of at most 256 bytes written at offset off, go through the whole
// symbolizer under the ceiling (symbolizeUnderCeiling). An input is the
// patch, not the module: small, so that a new one is minimised in
// moments (whole modules as inputs, a few KiB each, took the fuzzer's
// minutes of minimising each: 10 counted executions in 90 s). FuzzELF
// fuzzes whole files.
func FuzzSymbolizeELF(f *testing.F) {
	bombs := smallBombs()
	names := make([]string, 0, len(bombs))
	for name := range bombs {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		f.Add(uint8(i), uint32(0), []byte{})
		f.Add(uint8(i), uint32(0x40), slices.Clone(bombs[name][0x40:0x80])) // (the first program or section headers)
	}
	dir := f.TempDir()
	var work []byte
	f.Fuzz(func(t *testing.T, which uint8, off uint32, patch []byte) {
		if len(patch) > 256 {
			return
		}
		work = testutil.Patched(work, bombs[names[int(which)%len(names)]], off, patch)
		symbolizeUnderCeiling(t, dir, work)
	})
}

// smallBombs are small inputs whose headers claim gigabytes.
func smallBombs() map[string][]byte {
	return map[string][]byte{
		"plain": testutil.BombELF(nil, nil),
		"shstrtab-claims-3g": testutil.BombELF(nil, &testutil.ELFSection{Flags: elf.SHF_COMPRESSED,
			Data: testutil.Compressed(elf.COMPRESS_ZSTD, 3<<30, testutil.ZstdZeros(4<<20))}),
		"debug-zstd-claims-1g": testutil.BombELF([]testutil.ELFSection{{Name: ".debug_info", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED,
			Data: testutil.Compressed(elf.COMPRESS_ZSTD, 1<<30, testutil.ZstdZeros(4<<20))}}, nil),
		"debug-zlib-claims-1g": testutil.BombELF([]testutil.ELFSection{{Name: ".debug_line", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED,
			Data: testutil.Compressed(elf.COMPRESS_ZLIB, 1<<30, testutil.ZlibZeros(1<<20))}}, nil),
		"zdebug-claims-1g": testutil.BombELF([]testutil.ELFSection{{Name: ".zdebug_info", Type: elf.SHT_PROGBITS,
			Data: append([]byte("ZLIB\x00\x00\x00\x00\x40\x00\x00\x00"), testutil.ZlibZeros(1<<20)...)}}, nil),
		"symtab-compressed": testutil.BombELF([]testutil.ELFSection{{Name: ".symtab2", Type: elf.SHT_SYMTAB, Flags: elf.SHF_COMPRESSED,
			Data: testutil.Compressed(elf.COMPRESS_ZSTD, 1<<30, testutil.ZstdZeros(4<<20))}}, nil),
	}
}
