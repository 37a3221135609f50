package hotspot

import (
	"encoding/binary"
	"testing"
)

// FuzzTables feeds arbitrary memory to the table reader and the rest of
// Open: the symbols' values (table pointers, entry strides and offsets)
// are the first words of the image, everything they point to is in it.
// Nothing may panic, hang, or read past the budget.
func FuzzTables(f *testing.F) {
	ti := newTableImage(
		map[string]Field{"JavaThread::_osthread": {Type: "OSThread*", Offset: 560},
			"CodeCache::_heaps": {Type: "GrowableArray<CodeHeap*>*", Static: true, Address: imgBase}},
		map[string]uint64{"JavaThread": 1384},
		map[string]int64{"frame::interpreter_frame_last_sp_offset": -2})
	f.Add(ti.b)
	f.Add(ti.b[:len(ti.b)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		im := &image{base: imgBase, b: data}
		sym := map[string]uint64{}
		for i, s := range tableSymbols {
			sym[s] = imgBase + uint64(8*i)
		}
		vm, err := Open(im, sym)
		if err == nil {
			vm.Threads()
			vm.BlobAt(imgBase)
		}
		if im.read > maxRead {
			t.Fatalf("read %d bytes", im.read)
		}
	})
}

// FuzzDebugInfo feeds arbitrary bytes to the compressed stream decoders:
// an nmethod's PcDescs and scope chains, and a method's line number
// table. Nothing may panic or loop unbounded.
func FuzzDebugInfo(f *testing.F) {
	// PcDescs (pc offset, scope offset, obj offset, flags) then scopes:
	// at 1 the outermost (sender 0, method 1, bci 5+1), at 4 an inlined
	// one (sender 1, method 2, bci 0+1); then a line table.
	pcs := []byte{}
	for _, d := range [][4]uint32{{0x10, 4, 0, 0}, {0x20, 1, 0, 0}} {
		for _, w := range d {
			pcs = binary.LittleEndian.AppendUint32(pcs, w)
		}
	}
	sd := []byte{0, 0, 1, 6, 1, 2, 1}
	lines := []byte{0x0d, 0x13, 0xff, 0x02, 0x04, 0}
	f.Add(pcs, sd, lines, uint32(0x10))
	f.Add(pcs, []byte{0, 0xc0, 0xff, 0xff, 0xff, 0xff, 1, 2}, []byte{0xff, 0xc0}, uint32(0x20))
	f.Fuzz(func(t *testing.T, pcs, sd, lines []byte, off uint32) {
		for _, exact := range []bool{false, true} {
			d := findPcDesc(pcs, 16, 0, 4, uint64(off), exact)
			if chain, ok := scopes(sd, d); ok && (len(chain) == 0 || len(chain) > maxInlineDepth) {
				t.Fatalf("chain of %d scopes", len(chain))
			}
		}
		for bci := -1; bci < 70; bci += 7 {
			lineFor(lines, bci)
		}
		pairsEnd(lines)
	})
}

// The decoders read what HotSpot's CompressedWriteStream writes: one
// byte below 192 is its value; a byte from 192 up adds the next byte
// times 64; zig-zag signs; line pairs packed in one byte (bci delta << 3
// | line delta) or escaped by 0xff.
func TestStreams(t *testing.T) {
	s := stream{b: []byte{5, 0xc1, 0x02, 0x03}}
	if v := s.uint(); v != 5 {
		t.Errorf("uint = %d, want 5", v)
	}
	if v := s.uint(); v != 0xc1+2*64 {
		t.Errorf("uint = %d, want %d", v, 0xc1+2*64)
	}
	if v := s.int(); v != -2 {
		t.Errorf("int of 3 = %d, want -2", v)
	}
	// (bci 1, line 5), (bci 3, line 8), escaped (bci 4, line 10).
	table := []byte{1<<3 | 5, 2<<3 | 3, 0xff, 2, 4, 0}
	for bci, want := range map[int]int{0: -1, 1: 5, 2: 5, 3: 8, 4: 10, 99: 10} {
		if got := lineFor(table, bci); got != want {
			t.Errorf("line of bci %d = %d, want %d", bci, got, want)
		}
	}
	chain, ok := scopes([]byte{0, 0, 1, 6, 1, 2, 1}, 4)
	if !ok || len(chain) != 2 || chain[0] != (scope{sender: 1, method: 2, bci: 1}) || chain[1] != (scope{sender: 0, method: 1, bci: 6}) {
		t.Errorf("scopes = %+v %v", chain, ok)
	}
	if _, ok := scopes([]byte{0, 4, 1, 6, 4, 2, 1}, 4); ok {
		t.Error("a scope that is its own sender is a chain")
	}
}
