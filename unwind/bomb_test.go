package unwind

import (
	"bytes"
	"debug/elf"
	"errors"
	"runtime"
	"testing"

	"stackshot/internal/safeelf"
	"stackshot/internal/testutil"
)

// allocated runs fn and returns the bytes it allocated, in all.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestDebugFrameBomb: a .debug_frame compressed to a few KB that claims and
// holds 1 GiB. debug/elf's Section.Data would inflate it whole; LoadTable
// refuses it before allocating (it is over the per-section cap).
func TestDebugFrameBomb(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  elf.CompressionType
		data []byte
	}{
		{"zstd", elf.COMPRESS_ZSTD, testutil.ZstdZeros(1 << 30)},
		{"zlib", elf.COMPRESS_ZLIB, testutil.ZlibZeros(1 << 30)},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := testutil.BombELF([]testutil.ELFSection{{Name: ".debug_frame", Type: elf.SHT_PROGBITS,
				Flags: elf.SHF_COMPRESSED, Data: testutil.Compressed(c.typ, 1<<30, c.data)}}, nil)
			var err error
			n := allocated(func() { _, err = LoadTable(bytes.NewReader(file), nil) })
			if err == nil {
				t.Error("LoadTable accepted the bomb")
			}
			if n > 64<<20 {
				t.Errorf("LoadTable allocated %d MiB for a %d KB file", n>>20, len(file)>>10)
			}
			t.Logf("err %v; %d KiB allocated", err, n>>10)
		})
	}
}

// TestLoadTableSharesBudget: the CFI sections are charged to the budget
// the caller shares (the symbolizer's): an 8 MiB .debug_frame is not even
// allocated when only 4 MiB are left, is read when 64 MiB are, and what
// was charged is given back once the table is compiled.
func TestLoadTableSharesBudget(t *testing.T) {
	file := testutil.BombELF([]testutil.ELFSection{{Name: ".debug_frame", Type: elf.SHT_PROGBITS,
		Flags: elf.SHF_COMPRESSED, Data: testutil.Compressed(elf.COMPRESS_ZSTD, 8<<20, testutil.ZstdZeros(8<<20))}}, nil)
	for _, c := range []struct {
		budget int64
		read   bool
	}{{4 << 20, false}, {64 << 20, true}} {
		b := safeelf.NewBudget(c.budget, 0)
		var err error
		n := allocated(func() { _, err = LoadTableLimited(nil, bytes.NewReader(file), nil, b) })
		if !errors.Is(err, ErrNoCFI) {
			t.Errorf("budget %d MiB: err %v, want ErrNoCFI (refused, or only zeros)", c.budget>>20, err)
		}
		if read := n >= 8<<20; read != c.read {
			t.Errorf("budget %d MiB: %d KiB allocated, want the section read: %v", c.budget>>20, n>>10, c.read)
		}
		if u := b.Used(); u != 0 {
			t.Errorf("budget %d MiB: %d bytes still charged after LoadTable", c.budget>>20, u)
		}
	}
}
