package symtab

import (
	"reflect"
	"testing"
)

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
	f.Add(encodePack([]packedUnit{{11, packEntry{b: encodeUnit(&cuDecoded{})}}, {90, packEntry{b: []byte{1, 2, 3}}}, {40, packEntry{dec: &cuDecoded{}}}}))
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
		if len(enc) != unitSize(dec) {
			t.Fatalf("unit re-encoded to %d bytes, unitSize says %d", len(enc), unitSize(dec))
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
