package symtab

import (
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
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

// FuzzSymbolizeELF loads arbitrary bytes as a module file through the
// whole symbolizer (opening by path, header checks, build id, debug-file
// search, DWARF, symbol tables, MiniDebugInfo, pclntab, lookups) under a
// memory ceiling: what one input makes the symbolizer allocate, in all,
// must stay under fuzzAllocCeiling, whatever sizes its headers claim.
// Seeds: the small bombs of smallBombs (committed, quoted as the fuzz
// corpus format wants, in testdata/fuzz/FuzzSymbolizeELF), the 3 GiB
// section-name bomb (FuzzELF seeds the built test targets).
func FuzzSymbolizeELF(f *testing.F) {
	f.Add(testutil.ShstrtabBomb())
	for _, b := range smallBombs() {
		f.Add(b)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
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
