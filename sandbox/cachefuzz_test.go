//go:build linux

package sandbox

import (
	"slices"
	"strings"
	"testing"

	"stackshot/internal/diskcache"
	"stackshot/symtab"
)

// FuzzCacheKey feeds the parent's check of a child's cache key with what a
// compromised child could send: a key it accepts is one the symbolizer
// could make, and its entry's name is a plain file name, whatever the key.
func FuzzCacheKey(f *testing.F) {
	for _, seed := range upSeeds() {
		if seed.m.Key != nil {
			f.Add(encodeValue(nil, &seed.m))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m upMsg
		if decodeInto(b, &m, 0) != nil {
			return
		}
		if checkKey(m.Key) != nil {
			return
		}
		k := *m.Key
		if !slices.Contains(symtab.CacheKinds, k.Kind) || !isHex(k.BuildID) || strings.ContainsAny(k.Part, "\x00\n") {
			t.Fatalf("accepted %+v", k)
		}
		if n := diskcache.EntryName(k); strings.ContainsAny(n, "/\x00") || len(n) != 42 {
			t.Fatalf("entry name %q", n)
		}
	})
}
