package hotspot

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// image is a crafted memory image: one region of bytes at base. Reads are
// counted, so a test can bound what a reader copies.
type image struct {
	base uint64
	b    []byte
	read int64
}

func (im *image) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	if a < im.base || a-im.base >= uint64(len(im.b)) {
		return 0, errors.New("unmapped")
	}
	im.read += int64(len(p))
	n := copy(p, im.b[a-im.base:])
	if n < len(p) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

// Entry layouts of the crafted tables (JDK 17's on x86-64).
const (
	imgBase        = 0x10000
	fieldStride    = 48 // typeName, fieldName, typeString, isStatic, offset, address
	typeStride     = 40 // typeName, superclassName, isOop, isInteger, isUnsigned, size
	constantStride = 16 // name, value
)

// tableImage builds an image holding the symbols (their values first, at
// imgBase, in tableSymbols order) and tables of the given fields, types
// and constants; sym maps each symbol to its address.
type tableImage struct {
	b   []byte
	sym map[string]uint64
}

func (ti *tableImage) at() uint64 { return imgBase + uint64(len(ti.b)) }

func (ti *tableImage) put64(v uint64) { ti.b = binary.LittleEndian.AppendUint64(ti.b, v) }

func (ti *tableImage) str(s string) uint64 {
	a := ti.at()
	ti.b = append(append(ti.b, s...), 0)
	for len(ti.b)%8 != 0 {
		ti.b = append(ti.b, 0)
	}
	return a
}

func (ti *tableImage) setSym(name string, v uint64) {
	binary.LittleEndian.PutUint64(ti.b[ti.sym[name]-imgBase:], v)
}

func newTableImage(fields map[string]Field, sizes map[string]uint64, consts map[string]int64) *tableImage {
	ti := &tableImage{sym: map[string]uint64{}}
	for _, s := range tableSymbols {
		ti.sym[s] = ti.at()
		ti.put64(0)
	}
	for s, v := range map[string]uint64{
		"gHotSpotVMStructEntryArrayStride": fieldStride, "gHotSpotVMStructEntryTypeNameOffset": 0,
		"gHotSpotVMStructEntryFieldNameOffset": 8, "gHotSpotVMStructEntryTypeStringOffset": 16,
		"gHotSpotVMStructEntryIsStaticOffset": 24, "gHotSpotVMStructEntryOffsetOffset": 32,
		"gHotSpotVMStructEntryAddressOffset": 40,
		"gHotSpotVMTypeEntryArrayStride":     typeStride, "gHotSpotVMTypeEntryTypeNameOffset": 0,
		"gHotSpotVMTypeEntrySuperclassNameOffset": 8, "gHotSpotVMTypeEntrySizeOffset": 32,
		"gHotSpotVMIntConstantEntryArrayStride": constantStride, "gHotSpotVMIntConstantEntryNameOffset": 0,
		"gHotSpotVMIntConstantEntryValueOffset":  8,
		"gHotSpotVMLongConstantEntryArrayStride": constantStride, "gHotSpotVMLongConstantEntryNameOffset": 0,
		"gHotSpotVMLongConstantEntryValueOffset": 8,
	} {
		ti.setSym(s, v)
	}
	type fe struct {
		typ, field, ts uint64
		f              Field
	}
	var fes []fe
	for k, f := range fields {
		typ, field, _ := strings.Cut(k, "::")
		fes = append(fes, fe{ti.str(typ), ti.str(field), ti.str(f.Type), f})
	}
	ti.setSym("gHotSpotVMStructs", ti.at())
	for _, e := range fes {
		static := uint64(0)
		if e.f.Static {
			static = 1
		}
		for _, v := range []uint64{e.typ, e.field, e.ts, static, e.f.Offset, e.f.Address} {
			ti.put64(v)
		}
	}
	ti.b = append(ti.b, make([]byte, fieldStride)...)
	type te struct{ name, size uint64 }
	var tes []te
	for n, s := range sizes {
		tes = append(tes, te{ti.str(n), s})
	}
	ti.setSym("gHotSpotVMTypes", ti.at())
	for _, e := range tes {
		for _, v := range []uint64{e.name, 0, 0, 0, e.size} {
			ti.put64(v)
		}
	}
	ti.b = append(ti.b, make([]byte, typeStride)...)
	type ce struct {
		name uint64
		v    int64
	}
	var ces []ce
	for n, v := range consts {
		ces = append(ces, ce{ti.str(n), v})
	}
	for _, table := range []string{"gHotSpotVMIntConstants", "gHotSpotVMLongConstants"} {
		ti.setSym(table, ti.at())
		if table == "gHotSpotVMIntConstants" {
			for _, e := range ces {
				ti.put64(e.name)
				ti.put64(uint64(uint32(int32(e.v))))
			}
		}
		ti.b = append(ti.b, make([]byte, constantStride)...)
	}
	return ti
}

func (ti *tableImage) image() *image { return &image{base: imgBase, b: ti.b} }

// The crafted tables are read back entry for entry: fields (static or
// not), type sizes, signed int constants.
func TestReadTables(t *testing.T) {
	ti := newTableImage(
		map[string]Field{"JavaThread::_osthread": {Type: "OSThread*", Offset: 560},
			"CodeCache::_heaps": {Type: "GrowableArray<CodeHeap*>*", Static: true, Address: 0x7f00}},
		map[string]uint64{"JavaThread": 1384},
		map[string]int64{"frame::interpreter_frame_last_sp_offset": -2})
	tb, err := readTables(newMem(ti.image()), ti.sym)
	if err != nil {
		t.Fatal(err)
	}
	if f := tb.Fields["JavaThread::_osthread"]; f.Offset != 560 || f.Static || f.Type != "OSThread*" {
		t.Errorf("JavaThread::_osthread = %+v", f)
	}
	if f := tb.Fields["CodeCache::_heaps"]; !f.Static || f.Address != 0x7f00 {
		t.Errorf("CodeCache::_heaps = %+v", f)
	}
	if tb.Sizes["JavaThread"] != 1384 || tb.Constants["frame::interpreter_frame_last_sp_offset"] != -2 {
		t.Errorf("sizes %v, constants %v", tb.Sizes, tb.Constants)
	}
	// Tables that lack what the reader needs are an error naming it.
	if _, err := newLayout(tb); err == nil || !strings.Contains(err.Error(), "the JVM's tables lack") {
		t.Errorf("newLayout of a near-empty table: %v", err)
	}
}

// Corrupted tables end in an error, never a hang or an unbounded read: a
// table without its terminator, a name without its NUL, an entry stride
// of 0 or of a megabyte, a table pointer into nothing.
func TestCorruptTables(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(ti *tableImage)
		want    string
	}{
		{"no terminator", func(ti *tableImage) {
			// Entries of 16 bytes whose name is the word itself: a
			// run of pointers to a valid string, never NULL.
			name := ti.str("T")
			a := ti.at()
			for i := 0; i < 3*maxEntries; i++ {
				ti.put64(name)
			}
			ti.setSym("gHotSpotVMIntConstants", a)
			ti.setSym("gHotSpotVMIntConstantEntryArrayStride", 16)
			ti.setSym("gHotSpotVMIntConstantEntryValueOffset", 8)
		}, "more than"},
		{"name without NUL", func(ti *tableImage) {
			a := ti.at()
			ti.b = append(ti.b, strings.Repeat("x", 4*maxName)...)
			e := ti.sym["gHotSpotVMStructs"]
			p, _ := (&image{base: imgBase, b: ti.b}).word(e)
			binary.LittleEndian.PutUint64(ti.b[p-imgBase:], a)
		}, "longer than"},
		{"stride zero", func(ti *tableImage) { ti.setSym("gHotSpotVMStructEntryArrayStride", 0) }, "entry size 0"},
		{"huge stride", func(ti *tableImage) { ti.setSym("gHotSpotVMStructEntryArrayStride", 1<<20) }, "entry size"},
		{"member past entry", func(ti *tableImage) { ti.setSym("gHotSpotVMStructEntryAddressOffset", 48) }, "past the entry"},
		{"table in nothing", func(ti *tableImage) { ti.setSym("gHotSpotVMStructs", 0xdead0000) }, "unmapped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ti := newTableImage(map[string]Field{"A::_b": {Type: "int", Offset: 8}}, map[string]uint64{"A": 16}, map[string]int64{"C": 1})
			tc.corrupt(ti)
			im := ti.image()
			_, err := Open(im, ti.sym)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v, want an error saying %q", err, tc.want)
			}
			if im.read > maxRead {
				t.Errorf("read %d bytes, more than the budget of %d", im.read, maxRead)
			}
		})
	}
}

// word reads a little-endian word of the image (for building tests).
func (im *image) word(a uint64) (uint64, error) {
	var b [8]byte
	if _, err := im.ReadAt(b[:], int64(a)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// The read budget ends any reading past maxRead bytes.
func TestReadBudget(t *testing.T) {
	im := &image{base: imgBase, b: make([]byte, 1<<20)}
	m := newMem(im)
	var err error
	for i := 0; i < 2*maxRead/(1<<20) && err == nil; i++ {
		err = m.read(make([]byte, 1<<20), imgBase)
	}
	if !errors.Is(err, errBudget) || im.read > maxRead {
		t.Errorf("after %d bytes: %v", im.read, err)
	}
}
