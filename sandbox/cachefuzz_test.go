//go:build linux

package sandbox

import (
	"encoding/json"
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
	f.Add([]byte(`{"k":"cacheget","len":1048576,"key":{"Kind":"symbols","BuildID":"0123abcd","Size":10,"Dev":1,"Ino":2,"Ctime":3,"Part":"v1 debug=none alt=none"}}`))
	f.Add([]byte(`{"k":"cacheput","key":{"Kind":"../ns-u0-g0/x","BuildID":"../../etc/passwd"},"data":"cHJvYmU="}`))
	f.Add([]byte(`{"k":"cacheget","key":{"Kind":"section","BuildID":"ab","Part":"\uffff/w=="}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m upMsg
		if json.Unmarshal(b, &m) != nil {
			return
		}
		mapStrings(&m, decodeRaw)
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
