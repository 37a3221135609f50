package output

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"stackshot/report"
)

// chunks reads its input n bytes at a time, as a pipe may hand it over.
type chunks struct {
	b []byte
	n int
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

// Symbolize tells prefetch every address of a line read (lines split
// across reads included) before it looks it up, and answers exactly as
// without a prefetch.
func TestSymbolizePrefetchesReadLines(t *testing.T) {
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "%#x %x\n", 0x1000+i, 0x9000+i)
	}
	in.WriteString("zz 0x77\n0x88") // a word that is not an address; a last line without newline
	run := func(chunk int, withPrefetch bool) (string, map[uint64]bool) {
		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		prefetched := map[uint64]bool{}
		early := map[uint64]bool{}
		lookup := func(a uint64) []report.Frame {
			early[a] = prefetched[a]
			return []report.Frame{{Function: fmt.Sprintf("f%x", a), File: "a.c", Line: int(a % 97)}}
		}
		var prefetch func([]uint64)
		if withPrefetch {
			prefetch = func(addrs []uint64) {
				for _, a := range addrs {
					prefetched[a] = true
				}
			}
		}
		if err := Symbolize(w, nil, &chunks{[]byte(in.String()), chunk}, lookup, prefetch, false, true); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		return out.String(), early
	}
	want, _ := run(4096, false)
	for _, chunk := range []int{1, 7, 100, 4096} {
		got, early := run(chunk, true)
		if got != want {
			t.Fatalf("chunks of %d: answers differ with prefetch", chunk)
		}
		for i := range 300 {
			for _, a := range []uint64{uint64(0x1000 + i), uint64(0x9000 + i)} {
				if !early[a] {
					t.Fatalf("chunks of %d: %#x looked up before it was prefetched", chunk, a)
				}
			}
		}
		if !early[0x77] {
			t.Fatalf("chunks of %d: 0x77 (beside a non-address) not prefetched", chunk)
		}
		// The last line has no newline: it is answered, unannounced.
		if _, ok := early[0x88]; !ok {
			t.Fatalf("chunks of %d: the last line was not answered", chunk)
		}
	}
}
