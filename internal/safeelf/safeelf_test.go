package safeelf

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"stackshot/internal/bin"
	"stackshot/internal/testutil"
)

// TestCheckRealFiles: the checks refuse no real file: this test binary,
// every shared object it and the system's tools map, and separate debug
// files when the machine has them.
func TestCheckRealFiles(t *testing.T) {
	files := []string{"/proc/self/exe"}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(maps), "\n") {
		if i := strings.Index(l, " /"); i >= 0 {
			files = append(files, strings.TrimSpace(l[i:]))
		}
	}
	for _, pat := range []string{"/usr/lib/x86_64-linux-gnu/lib*.so*", "/usr/bin/*", "/usr/lib/debug/.build-id/*/*.debug"} {
		m, _ := filepath.Glob(pat)
		if len(m) > 200 {
			m = m[:200]
		}
		files = append(files, m...)
	}
	checked, compared := 0, 0
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			f.Close()
			continue
		}
		if _, err := elf.NewFile(f); err != nil {
			f.Close()
			continue // not ELF (or not for debug/elf either): nothing to compare
		}
		sf, err := Open(f, st.Size(), nil)
		if err != nil {
			t.Errorf("%s: refused: %v", p, err)
		} else {
			for _, s := range sf.Sections {
				if s.Type == elf.SHT_NOBITS || s.Size > DefaultSectionBytes {
					continue
				}
				got, err := sf.Data(nil, s)
				if err != nil {
					t.Errorf("%s: section %s: %v", p, s.Name, err)
				}
				if err == nil && s.Flags&elf.SHF_COMPRESSED != 0 && compared < 200 {
					// The in-memory zlib decoder against debug/elf's reader.
					want, werr := s.Data()
					if werr != nil || !bytes.Equal(got, want) {
						t.Errorf("%s: section %s decompressed differs from debug/elf's (%v)", p, s.Name, werr)
					}
					compared++
				}
			}
			checked++
		}
		f.Close()
	}
	if checked < 10 {
		t.Fatalf("only %d ELF files checked", checked)
	}
	t.Logf("%d real ELF files opened and read, %d compressed sections compared with debug/elf's", checked, compared)
}

// TestCheckRefuses: the malformed headers debug/elf would trust.
func TestCheckRefuses(t *testing.T) {
	plain := testutil.BombELF(nil, nil)
	if _, err := Check(bytes.NewReader(plain), int64(len(plain))); err != nil {
		t.Fatalf("plain file refused: %v", err)
	}
	bomb := testutil.ShstrtabBomb()
	truncated := plain[:len(plain)-64] // the last section header is cut off
	outside := bytes.Clone(plain)
	// .text's offset (section 1, sh_offset at +24) past the end of the file.
	shoff := int(binary.LittleEndian.Uint64(outside[40:]))
	binary.LittleEndian.PutUint64(outside[shoff+64+24:], uint64(len(outside)))
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"compressed section-name table", bomb, "compressed section-name table"},
		{"headers cut off", truncated, "do not fit the file"},
		{"section outside the file", outside, "outside the file"},
		{"not elf", []byte(strings.Repeat("x", 100)), "bad magic"},
	} {
		_, err := Check(bytes.NewReader(c.b), int64(len(c.b)))
		var fe *bin.FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want a FormatError saying %q", c.name, err, c.want)
		}
	}
}

// TestBudgetShared: concurrent takers never overdraw the budget.
func TestBudgetShared(t *testing.T) {
	b := NewBudget(100<<20, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.Take(10<<20) == nil {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if granted != 10 || b.Used() != 100<<20 {
		t.Errorf("%d grants of 10 MiB, %d bytes used; want 10 and 100 MiB", granted, b.Used())
	}
	if err := b.Take(1); !errors.Is(err, ErrBudget) {
		t.Errorf("take past the budget: %v", err)
	}
}

// TestReadStreamCap: a stream longer than the per-section cap is refused
// and its charge given back.
func TestReadStreamCap(t *testing.T) {
	b := NewBudget(64<<20, 4<<20)
	_, err := ReadStream(nil, "s", io.LimitReader(zeros{}, 5<<20), b)
	if !errors.Is(err, ErrTooLarge) || b.Used() != 0 {
		t.Errorf("err %v, used %d; want ErrTooLarge and nothing charged", err, b.Used())
	}
	d, err := ReadStream(nil, "s", io.LimitReader(zeros{}, 3<<20+5), b)
	if err != nil || len(d) != 3<<20+5 || b.Used() != int64(len(d)) {
		t.Errorf("within the cap: %d bytes, err %v, used %d", len(d), err, b.Used())
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestBudgetDefaults: a raised total raises the per-section cap with it.
func TestBudgetDefaults(t *testing.T) {
	for _, c := range []struct{ total, section, wantTotal, wantSection int64 }{
		{0, 0, DefaultTotalBytes, DefaultSectionBytes},
		{4 << 30, 0, 4 << 30, 2 << 30},
		{64 << 20, 0, 64 << 20, 64 << 20},
		{4 << 30, 1 << 20, 4 << 30, 1 << 20},
	} {
		b := NewBudget(c.total, c.section)
		if b.total != c.wantTotal || b.section != c.wantSection {
			t.Errorf("NewBudget(%d, %d) = total %d section %d; want %d, %d", c.total, c.section, b.total, b.section, c.wantTotal, c.wantSection)
		}
	}
}
