package symtab

import (
	"bytes"
	"testing"

	"github.com/ulikunitz/xz"
)

// xzBlocks compresses data in blocks of 64 KiB with a 1 MiB dictionary.
func xzBlocks(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := xz.WriterConfig{BlockSize: 64 << 10, DictCap: 1 << 20}.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestXZLimits: the dictionary of every block and the total size are read
// from the stream before decoding; a later block asking for a 4 GiB
// dictionary (which the xz reader would allocate) is seen.
func TestXZLimits(t *testing.T) {
	data := bytes.Repeat([]byte("stackshot "), 30000) // 300 KB: several blocks
	b := xzBlocks(t, data)
	dict, total, ok := xzLimits(b)
	if !ok || dict != 1<<20 || total != uint64(len(data)) {
		t.Fatalf("xzLimits = %d, %d, %v; want 1 MiB, %d, true", dict, total, ok, len(data))
	}
	// Find the second block header: the first block is followed by it;
	// patch its LZMA2 property byte (the last filter byte before padding)
	// to 40, a 4 GiB dictionary.
	hdrs := 0
	for off := 12; off < len(b)-8; off++ {
		// A block header for LZMA2 alone: size, flags, 0x21 0x01 prop.
		if b[off+2] == 0x21 && b[off+3] == 0x01 && int(b[off]) == 2 {
			hdrs++
			if hdrs == 2 {
				p := bytes.Clone(b)
				p[off+4] = 40
				if d, _, ok := xzLimits(p); !ok || d != 1<<32-1 {
					t.Errorf("patched second block: dict %d ok %v; want 4 GiB", d, ok)
				}
				return
			}
		}
	}
	t.Fatalf("found %d LZMA2 block headers, want at least 2", hdrs)
}
