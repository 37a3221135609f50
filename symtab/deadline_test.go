package symtab

import (
	"context"
	"debug/elf"
	"errors"
	"os"
	"stackshot/internal/testutil"
	"sync/atomic"
	"testing"
	"time"
)

// expiringCtx is a context that is done after its Err has been asked n
// times: a deadline that falls at a chosen point of the work, whatever the
// machine's speed.
type expiringCtx struct {
	context.Context
	left atomic.Int64
}

func expireAfter(n int64) *expiringCtx {
	c := &expiringCtx{Context: context.Background()}
	c.left.Store(n)
	return c
}

func (c *expiringCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *expiringCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// slowDebugFile has a .debug_info of 200 MiB (zstd, within the default
// caps): decompressing it is the slow part of symbolizing the file.
func slowDebugFile(t *testing.T) string {
	return writeBomb(t, "slow.debug", testutil.BombELF([]testutil.ELFSection{{Name: ".debug_info", Type: elf.SHT_PROGBITS,
		Flags: elf.SHF_COMPRESSED, Data: testutil.Compressed(elf.COMPRESS_ZSTD, 200<<20, testutil.ZstdZeros(200<<20))}}, nil))
}

// TestDeadlineStopsDecompression: the context ends in the middle of the
// .debug_info decompression. The lookup returns unresolved at once, says
// so (Expired), keeps nothing charged to the budget, and no module is
// opened afterwards; without a deadline the same file names the function.
func TestDeadlineStopsDecompression(t *testing.T) {
	file := slowDebugFile(t)

	s := New(Options{})
	m, err := s.Module(ModuleRef{Path: file})
	if err != nil {
		t.Fatal(err)
	}
	if got := lookupName(m, testutil.BombFuncAddr+0x10); got != "bomb_func" {
		t.Fatalf("without a deadline: %q, want bomb_func", got)
	}
	if s.Expired() {
		t.Error("Expired() without a deadline")
	}

	ctx := expireAfter(20) // a few chunks into the 200 MiB
	s = New(Options{Context: ctx})
	m, err = s.Module(ModuleRef{Path: file})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Lookup(testutil.BombFuncAddr+0x10, nil); len(got) != 0 {
		t.Errorf("after the deadline: %+v, want nothing resolved", got)
	}
	if !s.Expired() {
		t.Error("Expired() = false after a lookup cut short")
	}
	if ctx.left.Load() > 0 {
		t.Fatalf("the context was asked only %d times: the deadline fell after the work", 20-ctx.left.Load())
	}
	if u := s.BudgetUsed(); u > 1<<20 {
		t.Errorf("budget still charged with %d bytes after giving up", u)
	}
	other := writeBomb(t, "plain.elf", testutil.BombELF(nil, nil))
	if _, err := s.Module(ModuleRef{Path: other}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a module opened after the deadline: err %v", err)
	}
}

// BenchmarkSlowDebugFile: symbolizing the 200 MiB .debug_info file from
// cold, without a deadline and with one of 10 ms (what the deadline
// bounds: the time past it is one chunk's decompression).
func BenchmarkSlowDebugFile(b *testing.B) {
	dir := b.TempDir()
	file := dir + "/slow.debug"
	if err := writeFile(file, testutil.BombELF([]testutil.ELFSection{{Name: ".debug_info", Type: elf.SHT_PROGBITS,
		Flags: elf.SHF_COMPRESSED, Data: testutil.Compressed(elf.COMPRESS_ZSTD, 200<<20, testutil.ZstdZeros(200<<20))}}, nil)); err != nil {
		b.Fatal(err)
	}
	for _, d := range []time.Duration{0, 10 * time.Millisecond} {
		b.Run("deadline="+d.String(), func(b *testing.B) {
			for b.Loop() {
				opts := Options{}
				var cancel context.CancelFunc = func() {}
				if d > 0 {
					opts.Context, cancel = context.WithTimeout(context.Background(), d)
				}
				s := New(opts)
				if m, err := s.Module(ModuleRef{Path: file}); err == nil {
					m.Lookup(testutil.BombFuncAddr+0x10, nil)
				}
				s.Close()
				cancel()
			}
		})
	}
}

func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }
