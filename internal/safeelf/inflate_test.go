package safeelf

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"io"
	"math/rand"
	"os"
	"testing"
)

// zlibRef decodes src with compress/zlib up to n bytes: what it returns
// before any error, and whether it gave all n bytes.
func zlibRef(src []byte, n int) ([]byte, bool) {
	zr, err := zlib.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, false
	}
	out := make([]byte, n)
	m, err := io.ReadFull(zr, out)
	return out[:m], err == nil
}

// checkInflate compares inflateZlib with compress/zlib on src for an
// output of n bytes: where zlib gives all n bytes, the same bytes; where
// inflateZlib succeeds, zlib gave a prefix of its output before failing
// (it loses the part of a block it decoded before an error).
func checkInflate(t *testing.T, src []byte, n int) {
	t.Helper()
	want, ok := zlibRef(src, n)
	got := make([]byte, n)
	err := inflateZlib(nil, got, src)
	switch {
	case ok && err != nil:
		t.Fatalf("n=%d: compress/zlib decodes the stream, inflateZlib: %v", n, err)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("n=%d: output differs from compress/zlib's", n)
	case !ok && err == nil && !bytes.HasPrefix(got, want):
		t.Fatalf("n=%d: inflateZlib's output does not extend what compress/zlib gave before its error", n)
	}
}

func compressed(t testing.TB, data []byte, level int) []byte {
	var b bytes.Buffer
	zw, err := zlib.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(data)
	zw.Close()
	return b.Bytes()
}

// inflateInputs are data of the kinds debug sections hold (this test's own
// executable: code, DWARF, strings), random bytes and runs.
func inflateInputs(t testing.TB) [][]byte {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	rnd := make([]byte, 100_000)
	rand.New(rand.NewSource(1)).Read(rnd)
	runs := bytes.Repeat([]byte("abcabcabd\x00\x00\x00\x00\x00\x01"), 20_000)
	return [][]byte{bin[:min(len(bin), 4<<20)], rnd, runs, []byte("x"), {}}
}

// TestInflateMatchesZlib decodes every compression level (stored, fixed
// and dynamic Huffman blocks, long and overlapping matches) and every
// truncation of a small stream, against compress/zlib.
func TestInflateMatchesZlib(t *testing.T) {
	for _, data := range inflateInputs(t) {
		for _, level := range []int{flate.NoCompression, flate.BestSpeed, flate.DefaultCompression, flate.BestCompression, flate.HuffmanOnly} {
			src := compressed(t, data, level)
			checkInflate(t, src, len(data))
			if len(data) > 10 {
				checkInflate(t, src, len(data)/3) // a declared size short of the stream
				if err := inflateZlib(nil, make([]byte, len(data)+1), src); err == nil {
					t.Fatalf("level %d: a stream shorter than the declared size decoded", level)
				}
			}
		}
	}
	small := compressed(t, bytes.Repeat([]byte("stackshot debug_info "), 300), flate.DefaultCompression)
	for i := range small {
		checkInflate(t, small[:i], 300*21)
	}
	for i := 2; i < len(small); i++ {
		bad := bytes.Clone(small)
		bad[i] ^= 0x55
		checkInflate(t, bad, 300*21)
	}
}

// FuzzInflate checks inflateZlib against compress/zlib on arbitrary
// streams and declared sizes: never a panic, never output zlib would not
// give.
func FuzzInflate(f *testing.F) {
	for _, level := range []int{flate.NoCompression, flate.BestSpeed, flate.BestCompression, flate.HuffmanOnly} {
		f.Add(compressed(f, bytes.Repeat([]byte("int main(void) { return 0; }\n"), 40), level), uint16(1160))
	}
	f.Fuzz(func(t *testing.T, src []byte, n uint16) {
		checkInflate(t, src, int(n))
	})
}

func BenchmarkInflate(b *testing.B) {
	data := inflateInputs(b)[0]
	src := compressed(b, data, flate.DefaultCompression)
	b.Run("inflateZlib", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		out := make([]byte, len(data))
		for b.Loop() {
			if err := inflateZlib(nil, out, src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compress-zlib", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		out := make([]byte, len(data))
		for b.Loop() {
			zr, _ := zlib.NewReader(bytes.NewReader(src))
			if _, err := io.ReadFull(zr, out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestInflateProgress: the bytes progress says are final are the output's,
// at the time it says so (the test's executable, up to 4 MB: several
// calls), and what it reports only grows.
func TestInflateProgress(t *testing.T) {
	data := inflateInputs(t)[0]
	if len(data) < 3*progressStep {
		t.Skipf("executable of %d bytes: too small for several calls", len(data))
	}
	for _, level := range []int{zlib.NoCompression, zlib.BestSpeed, zlib.DefaultCompression} {
		src := compressed(t, data, level)
		dst := make([]byte, len(data))
		calls, last := 0, 0
		err := inflateZlibProgress(nil, dst, src, func(buf []byte, n int) {
			calls++
			if &buf[0] != &dst[0] || n <= last || n > len(dst) {
				t.Fatalf("level %d: progress(%d bytes of %d, after %d)", level, n, len(buf), last)
			}
			if !bytes.Equal(buf[:n], data[:n]) {
				t.Fatalf("level %d: the %d bytes said final differ from the output", level, n)
			}
			last = n
		})
		if err != nil || !bytes.Equal(dst, data) {
			t.Fatalf("level %d: %v", level, err)
		}
		if calls < 2 {
			t.Fatalf("level %d: %d progress calls for %d bytes", level, calls, len(data))
		}
	}
}
