package symtab

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// syntheticPclntab lays out, by hand and following the runtime's
// definitions (runtime/symtab.go pcHeader, _func; symtabinl.go
// inlinedCall), a Go 1.20 table with one function, main.outer, 8 bytes
// long, into which main.inner is inlined at [4,8) from the call at pc 2:
//
//	pc 0-1: line 9, pc 2-3: line 10 (the call), not inlined
//	pc 4-7: line 20, inline tree entry 0 (main.inner, parentPc 2)
//
// The inline tree follows the table, at gofunc = table address + treeOff.
func syntheticPclntab() []byte {
	le := binary.LittleEndian
	names := []byte("main.outer\x00main.inner\x00")
	cutab := make([]byte, 4) // file 0 -> filetab offset 0
	filetab := []byte("/src/a.go\x00")
	// pc-value tables: (zigzag value delta, pc delta) pairs, then 0.
	pctab := []byte{0}         // offset 0 means "no table"
	pcln := uint32(len(pctab)) // line 9 for 2 bytes, 10 for 2, 20 for 4
	pctab = append(pctab, 20, 2, 2, 2, 20, 4, 0)
	pcfile := uint32(len(pctab)) // file 0 for 8 bytes
	pctab = append(pctab, 2, 8, 0)
	inlIdx := uint32(len(pctab)) // -1 for 4 bytes, 0 for 4
	pctab = append(pctab, 0, 4, 2, 4, 0)

	var fn bytes.Buffer
	// ftab: {entryoff, funcoff} for 1 function, then the end entry.
	w32 := func(b *bytes.Buffer, v uint32) { binary.Write(b, le, v) }
	w32(&fn, 0)
	w32(&fn, 16)
	w32(&fn, 8)
	w32(&fn, 0)
	// _func at 16.
	for _, v := range []uint32{0, 0, 0, 0, 0, pcfile, pcln, 3, 0, 1} { // entryOff nameOff args deferreturn pcsp pcfile pcln npcdata cuOffset startLine
		w32(&fn, v)
	}
	fn.Write([]byte{0, 0, 0, 4})               // funcID, flag, pad, nfuncdata
	for _, v := range []uint32{0, 0, inlIdx} { // pcdata
		w32(&fn, v)
	}
	treeAt := fn.Len() + 3*4                                            // funcdata[FUNCDATA_InlTree], set below
	for _, v := range []uint32{^uint32(0), ^uint32(0), ^uint32(0), 0} { // funcdata
		w32(&fn, v)
	}

	const hdr = 8 + 8*8
	off := uint64(hdr)
	var b bytes.Buffer
	b.Write([]byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8})
	parts := [][]byte{names, cutab, filetab, pctab, fn.Bytes()}
	offs := make([]uint64, len(parts))
	for i, p := range parts {
		offs[i] = off
		off += uint64(len(p))
	}
	for _, v := range []uint64{1, 1, 0, offs[0], offs[1], offs[2], offs[3], offs[4]} {
		binary.Write(&b, le, v)
	}
	for _, p := range parts {
		b.Write(p)
	}
	// The inline tree right after: {funcID, pad[3], nameOff, parentPc,
	// startLine}; gofunc is the table's own address, so its funcdata
	// offset is where it starts.
	data := b.Bytes()
	le.PutUint32(data[offs[4]+uint64(treeAt):], uint32(len(data)))
	data = append(data, 0, 0, 0, 0)
	for _, v := range []uint32{11, 2, 5} {
		data = le.AppendUint32(data, v)
	}
	return data
}

func TestGoInlineSynthetic(t *testing.T) {
	data := syntheticPclntab()
	const text, base = 0x401000, 0x10000
	file := &openFile{r: bytes.NewReader(data), size: int64(len(data))}
	g := newGoInlineLoads(data, binary.LittleEndian, text, base, file, []loadSeg{{off: 0, filesz: uint64(len(data)), vaddr: base, memsz: uint64(len(data))}})
	if g == nil {
		t.Fatal("table rejected")
	}
	cases := []struct {
		pc   uint64
		want []Sym
	}{
		{text + 1, []Sym{{Function: "main.outer", Offset: 1, File: "/src/a.go", Line: 9}}},
		{text + 3, []Sym{{Function: "main.outer", Offset: 3, File: "/src/a.go", Line: 10}}},
		{text + 5, []Sym{
			{Function: "main.inner", File: "/src/a.go", Line: 20, Inlined: true},
			{Function: "main.outer", Offset: 5, File: "/src/a.go", Line: 10},
		}},
	}
	for _, c := range cases {
		got, ok := g.lookup(c.pc, nil)
		if !ok || !symsEqual(got, c.want) {
			t.Errorf("lookup(%#x) = %+v, %v; want %+v", c.pc, got, ok, c.want)
		}
	}
	if _, ok := g.lookup(text+8, nil); ok {
		t.Error("pc past the last function resolved")
	}
	if _, ok := g.lookup(text-1, nil); ok {
		t.Error("pc before text resolved")
	}
}
