package symtab

import (
	"testing"
)

// A symbol table comes back from its cache entry as it went in (used in
// place: addresses, ends, raw and demangled names), and an entry whose
// names, ends or addresses are out of order is refused.
func TestSymbolsEntryRoundTrip(t *testing.T) {
	raw := []rawSym{
		{addr: 0x10, size: 8, name: "_Z1fv"},
		{addr: 0x20, secEnd: 0x40, name: "g"},
		{addr: 0x30, size: 4, name: ""},
		{addr: 0x40, size: 0x10, name: "h_long_name"},
	}
	want := buildSymTable(raw)
	b := encodeSymbols(want, []string{"symtab", "dynsym"})
	got, sources, err := decodeSymbols(b)
	if err != nil || len(sources) != 2 || sources[1] != "dynsym" {
		t.Fatalf("decode: %v %q", err, sources)
	}
	if got.count != 4 {
		t.Fatalf("%d symbols", got.count)
	}
	for i := range want.count {
		if got.addr[i] != want.addr[i] || got.end(i) != want.end(i) || got.name(i) != want.name(i) {
			t.Errorf("symbol %d: %#x-%#x %q, want %#x-%#x %q", i, got.addr[i], got.end(i), got.name(i), want.addr[i], want.end(i), want.name(i))
		}
	}
	if got.end(1) != 0x30 || got.name(3) != "h_long_name" || got.nameAt(0, true) != "f()" || got.nameAt(0, false) != "_Z1fv" {
		t.Errorf("ends or names: %#x %q %q", got.end(1), got.name(3), got.nameAt(0, true))
	}
	if i, ok := got.lookup(0x44); !ok || i != 3 {
		t.Errorf("lookup 0x44 = %d %v", i, ok)
	}
	// The table's layout after the sources: count, addresses, ends, name
	// ends, names.
	base := 4 + 4 + len("symtab") + 4 + len("dynsym") + 4
	for name, corrupt := range map[string]func(e []byte){
		"addresses out of order": func(e []byte) { le.PutUint64(e[base+8:], 0x8) },
		"an end before its address": func(e []byte) {
			le.PutUint64(e[base+4*8:], 0x10)
		},
		"name ends out of order": func(e []byte) { le.PutUint32(e[base+8*8+4:], 99) },
		"names cut short":        func(e []byte) { le.PutUint32(e[base+8*8+12:], 1) },
	} {
		e := append([]byte(nil), b...)
		corrupt(e)
		if _, _, err := decodeSymbols(e); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, err := decodeSymbols(b[:len(b)-1]); err == nil {
		t.Error("a truncated entry was accepted")
	}
}
