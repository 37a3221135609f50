package symtab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeShortLines writes a perf map of n short lines ("%x 1 fN"), the
// densest a target can write, plus a line over maxPerfMapLine, and the
// first entry again under a later name.
func writeShortLines(t *testing.T, n int) string {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%x 1 f%d\n", 0x1000+i, i)
	}
	fmt.Fprintf(&b, "%x 1 %s\n", 0x900, strings.Repeat("x", maxPerfMapLine+1))
	fmt.Fprintf(&b, "%x 1 latest\n", 0x1000)
	p := filepath.Join(t.TempDir(), "perf.map")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPerfMapBudgetByLines: a perf map's entries are charged by its lines
// before they are made, 32 bytes each however short the line (a 104 MB
// map of short lines took 1.8 GB when they were charged by the text's
// size). 40,000 lines of about 13 bytes need 2.5 MB beside their 0.6 MB
// of text (charged 2.4 MB by its size before): refused, and said, within
// a 2.8 MB budget; read within 8 MB, a line over maxPerfMapLine skipped.
func TestPerfMapBudgetByLines(t *testing.T) {
	p := writeShortLines(t, 40000)
	s := New(Options{PerfMap: p, MaxDebugBytes: 2_800_000})
	if pm := s.PerfMapFor(1, ""); pm != nil {
		t.Errorf("a map of 40,000 lines was read within a 2.8 MB budget")
	}
	if !s.BudgetExceeded() {
		t.Errorf("the refused map was not reported as over the budget")
	}
	s.Close()
	s = New(Options{PerfMap: p, MaxDebugBytes: 8 << 20})
	defer s.Close()
	pm := s.PerfMapFor(1, "")
	if pm == nil {
		t.Fatal("the map was not read within an 8 MB budget")
	}
	for _, c := range []struct {
		pc   uint64
		want string
	}{{0x1000, "latest"}, {0x1001, "f1"}, {0x1000 + 39999, "f39999"}, {0x900, ""}} {
		if n, _, _ := pm.Lookup(c.pc); n != c.want {
			t.Errorf("%#x: %q, want %q", c.pc, n, c.want)
		}
	}
	// Out of time: the parse stops, and says why.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s2 := New(Options{PerfMap: p, Context: ctx})
	defer s2.Close()
	if s2.PerfMapFor(1, "") != nil || !s2.Expired() {
		t.Errorf("a cancelled symbolizer read the map (or did not say it ran out of time)")
	}
}

// FuzzPerfMap: any text parses without a panic into an index sorted by
// start, each entry non-empty, the entry at each start named as indexed.
func FuzzPerfMap(f *testing.F) {
	for _, s := range []string{
		"1000 100 jit\n",
		"1000 10 a\n1000 10 b\r\n2000 0 empty\nzz 10 bad\n",
		"  0x1000 0X20 name with spaces\n\n\t3000 ffffffffffffffff wraps\n",
		"ffffffffffffff00 100 top\n1 1 \n",
		"1000 1 " + strings.Repeat("n", maxPerfMapLine+1) + "\n1001 1 after_long\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		pm, err := ParsePerfMap(bytes.NewReader(text))
		if err != nil {
			if pm != nil {
				t.Fatalf("error %v with a map", err)
			}
			return
		}
		for i := range pm.start {
			if pm.end[i] <= pm.start[i] || i > 0 && pm.start[i] <= pm.start[i-1] {
				t.Fatalf("entry %d: [%#x, %#x) after %#x", i, pm.start[i], pm.end[i], pm.start[max(i-1, 0)])
			}
			if n, off, ok := pm.Lookup(pm.start[i]); !ok || off != 0 || n != pm.name[i] {
				t.Fatalf("lookup of entry %d's start: %q %d %v, want %q", i, n, off, ok, pm.name[i])
			}
		}
	})
}
