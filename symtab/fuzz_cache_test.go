package symtab

import (
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"testing"
)

// TestUpdateCacheFuzzSeeds rewrites FuzzCachedDWARF's unit and pack seeds
// (the C++ target's first unit and all its units, as the cache holds
// them) when run with -update-seeds, after a change of their format.
func TestUpdateCacheFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("rewrites the seed corpus only with -update-seeds")
	}
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, cxxDebug(t, "dwarf5"))
	x := m.sources().dw
	var units []packedUnit
	for i, cu := range x.cus {
		dec := x.unit(cu)
		if dec.err != nil {
			t.Fatal(dec.err)
		}
		units = append(units, packedUnit{cu.off, packEntry{b: encodeUnit(dec)}})
		if i == 0 {
			writeSeed(t, "FuzzCachedDWARF", "unit-cxxprog-0", units[0].b)
		}
	}
	writeSeed(t, "FuzzCachedDWARF", "pack-cxxprog", slices.Concat(encodePack(units)...))
}

// FuzzCachedDWARF feeds cache payloads (a module's unit index, a decoded
// unit, a pack of units, a symbol table) to their decoders: never a panic, and a unit they accept can be
// looked up at every address it names.
func FuzzCachedDWARF(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeUnit(&cuDecoded{
		rows:  []lineRow{{addr: 0x10, file: 1, line: 3}, {addr: 0x20, end: true}},
		files: []string{"", "a.c"},
		funcs: []fnRange{{lo: 0x10, hi: 0x20, node: 0}},
		nodes: []fnNode{{name: "f", ranges: [][2]uint64{{0x10, 0x20}}, entry: 0x10, parent: -1, children: []int32{1}, callFile: -1},
			{name: "g", ranges: [][2]uint64{{0x14, 0x18}}, entry: 0x14, parent: 0, callFile: 1, callLine: 7}},
	}))
	f.Add(encodeSymbols(buildSymTable([]rawSym{{addr: 0x10, size: 8, name: "_Z1fv"}, {addr: 0x20, secEnd: 0x40, name: "g"}}), []string{"symtab"}))
	f.Add(slices.Concat(encodePack([]packedUnit{{11, packEntry{b: encodeUnit(&cuDecoded{})}}, {90, packEntry{b: []byte{1, 2, 3}}}, {40, packEntry{dec: &cuDecoded{}}}})...))
	f.Add(encodeIndex(&dwarfIndex{cus: []*cuInfo{{off: 11}, {off: 90}}, rng: []cuRange{{0x10, 0x20, 0}, {0x30, 0x40, 1}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if cus, rng, err := decodeIndex(b, 1<<20); err == nil {
			x := &dwarfIndex{cus: cus, rng: rng}
			for _, r := range rng {
				if x.findCU(r.lo) == nil {
					t.Fatalf("accepted range %+v finds no unit", r)
				}
			}
		}
		if st, _, err := decodeSymbols(b); err == nil && st != nil {
			for i := range st.count {
				if k, ok := st.lookup(st.addr[i]); !ok || k > i {
					t.Fatalf("symbol %d at %#x not found", i, st.addr[i])
				}
				st.nameAt(i, true)
			}
		}
		if units, err := decodePack(b); err == nil {
			for _, u := range units {
				decodeUnit(u)
			}
		}
		dec, err := decodeUnit(b)
		if err != nil {
			return
		}
		// Encoding it again gives the same bytes, in a buffer sized
		// exactly up front (encodePack relies on unitSize).
		enc := encodeUnit(dec)
		if table, _ := unitStrings(dec); len(enc) != unitSize(dec, table) {
			t.Fatalf("unit re-encoded to %d bytes, unitSize says %d", len(enc), unitSize(dec, table))
		}
		if again, err := decodeUnit(enc); err != nil || !reflect.DeepEqual(again.rows, dec.rows) || !reflect.DeepEqual(again.nodes, dec.nodes) {
			t.Fatalf("unit re-encoded does not decode to itself (%v)", err)
		}
		cu := &cuInfo{}
		cu.once.Do(func() { cu.dec = dec })
		x := &dwarfIndex{cus: []*cuInfo{cu}, rng: []cuRange{{0, ^uint64(0), 0}}}
		for i, r := range dec.rows {
			if i >= 256 {
				break
			}
			x.lookup(r.addr, nil, true)
		}
		for i, fr := range dec.funcs {
			if i >= 256 {
				break
			}
			x.lookup(fr.lo, nil, true)
			x.lookup(fr.hi-1, nil, false)
		}
	})
}

// TestCachedRowsChecked: the LEB128 line rows of a cached unit are
// refused when an address wraps, a file index passes 32 bits or a line
// leaves int32, and kept exactly otherwise (negative changes, the end
// flag, the widest values).
func TestCachedRowsChecked(t *testing.T) {
	rows := func(fields ...uint64) []byte {
		b := le.AppendUint32(nil, uint32(len(fields)/3))
		for _, f := range fields {
			b = binary.AppendUvarint(b, f)
		}
		for range 4 { // no files, functions or nodes
			b = le.AppendUint32(b, 0)
		}
		return b
	}
	zig := func(d int64) uint64 { return uint64(d<<1) ^ uint64(d>>63) }
	for name, b := range map[string][]byte{
		"address wraps":  rows(^uint64(0), 2, zig(1), 2, 2, zig(1)),
		"file too large": rows(0x10, 1<<33, zig(1)),
		"line too large": rows(0x10, 2, zig(math.MaxInt32), 0x10, 2, zig(1)),
		"short":          rows(0x10, 2)[:7],
	} {
		if _, err := decodeUnit(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	want := []lineRow{{addr: 0x10, file: 1, line: 100}, {addr: 0x18, file: 0, line: 7}, {addr: 0x18, file: 3, line: math.MaxInt32},
		{addr: ^uint64(0), file: math.MaxInt32, line: math.MinInt32, end: true}}
	dec, err := decodeUnit(encodeUnit(&cuDecoded{rows: want}))
	if err != nil || !reflect.DeepEqual(dec.rows, want) {
		t.Fatalf("rows %+v (%v), want %+v", dec, err, want)
	}
}
