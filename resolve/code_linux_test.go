//go:build linux

package resolve

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"stackshot/ptrace"
)

// ReadCode through the space's page cache reads what a direct read of
// live memory reads, byte for byte and count for count: within a page,
// across pages, across the end of an executable mapping (a short read
// when nothing follows), and again from the cache.
func TestReadLiveCodeMatchesMemory(t *testing.T) {
	mem := ptrace.MemReader{PID: os.Getpid()}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ lo, hi uint64 }
	var exec []span
	for _, line := range strings.Split(strings.TrimSpace(string(maps)), "\n") {
		f := strings.Fields(line)
		lo, hi, _ := strings.Cut(f[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		if strings.Contains(f[1], "r-x") {
			exec = append(exec, span{a, b})
		}
	}
	s := &Space{r: &Resolver{opts: Options{Live: true}}, mem: mem}
	checked, short := 0, 0
	for _, m := range exec {
		for _, c := range []struct {
			addr uint64
			n    int
		}{
			{m.lo, 16}, {m.lo + 4090, 15}, {m.lo + 100, 4096 + 200}, {m.hi - 5, 15}, {m.hi - 16, 16}, {m.lo, 15},
		} {
			if c.addr < m.lo || c.addr >= m.hi {
				continue
			}
			want := make([]byte, c.n)
			wn, werr := mem.ReadAt(want, int64(c.addr))
			for pass := range 2 { // the second from the cache
				got := make([]byte, c.n)
				gn, gerr := s.ReadCode(got, c.addr)
				if gn != wn || (gerr == nil) != (werr == nil) || !bytes.Equal(got[:gn], want[:wn]) {
					t.Errorf("%#x+%d (pass %d): cached read %d %v, direct %d %v", c.addr, c.n, pass, gn, gerr, wn, werr)
				}
			}
			checked++
			if wn < c.n {
				short++
			}
		}
	}
	t.Logf("%d reads over %d executable mappings, %d short (end of a mapping)", checked, len(exec), short)
	if checked == 0 {
		t.Fatal("no executable mapping read")
	}
}
