package hotspot

import (
	"fmt"
	"strings"
)

// The tables a HotSpot JVM exports for its Serviceability Agent
// (hotspot/share/runtime/vmStructs.cpp): gHotSpotVMStructs lists fields
// (type, name, offset or a static's address), gHotSpotVMTypes types and
// their sizes, gHotSpotVMIntConstants and gHotSpotVMLongConstants named
// constants. Each is a pointer to an array ended by an entry whose name is
// NULL; the layout of an entry is itself exported (the *Offset and
// *ArrayStride symbols), so nothing here depends on a release.

// maxEntries bounds each table (JDK 17 has about 2,600 fields).
const maxEntries = 20000

// maxName bounds a name in the tables.
const maxName = 256

// Field is one entry of gHotSpotVMStructs.
type Field struct {
	Type    string // the C++ type of the field ("JavaThread*")
	Static  bool
	Offset  uint64 // in the object (not static)
	Address uint64 // of a static
}

// Tables are a JVM's exported tables, read.
type Tables struct {
	Fields    map[string]Field  // by "Class::field"
	Sizes     map[string]uint64 // type sizes, by name
	Supers    map[string]string // superclass, by type name
	Constants map[string]int64  // int and long constants
}

// symbols the tables are found by.
var tableSymbols = []string{
	"gHotSpotVMStructs", "gHotSpotVMStructEntryArrayStride",
	"gHotSpotVMStructEntryTypeNameOffset", "gHotSpotVMStructEntryFieldNameOffset",
	"gHotSpotVMStructEntryTypeStringOffset", "gHotSpotVMStructEntryIsStaticOffset",
	"gHotSpotVMStructEntryOffsetOffset", "gHotSpotVMStructEntryAddressOffset",
	"gHotSpotVMTypes", "gHotSpotVMTypeEntryArrayStride",
	"gHotSpotVMTypeEntryTypeNameOffset", "gHotSpotVMTypeEntrySuperclassNameOffset",
	"gHotSpotVMTypeEntrySizeOffset",
	"gHotSpotVMIntConstants", "gHotSpotVMIntConstantEntryArrayStride",
	"gHotSpotVMIntConstantEntryNameOffset", "gHotSpotVMIntConstantEntryValueOffset",
	"gHotSpotVMLongConstants", "gHotSpotVMLongConstantEntryArrayStride",
	"gHotSpotVMLongConstantEntryNameOffset", "gHotSpotVMLongConstantEntryValueOffset",
}

// IsTableSymbol says whether a dynamic symbol's name is one the tables are
// found by.
func IsTableSymbol(name string) bool {
	return strings.HasPrefix(name, "gHotSpotVM")
}

// tableReader reads the tables, given the addresses of the symbols.
type tableReader struct {
	m   *mem
	sym map[string]uint64
	err error
}

// word reads the 8-byte value of a symbol (a pointer or an offset).
func (t *tableReader) word(name string) uint64 {
	if t.err != nil {
		return 0
	}
	a, ok := t.sym[name]
	if !ok {
		t.err = fmt.Errorf("libjvm.so exports no %s", name)
		return 0
	}
	v, err := t.m.u64(a)
	if err != nil {
		t.err = fmt.Errorf("%s: %w", name, err)
	}
	return v
}

// entryLayout is the layout of an entry of one table: its stride and the
// offset of each member used.
type entryLayout struct {
	base, stride uint64
	offs         []uint64
}

func (t *tableReader) layout(table, stride string, members ...string) entryLayout {
	l := entryLayout{base: t.word(table), stride: t.word(stride)}
	for _, m := range members {
		l.offs = append(l.offs, t.word(m))
	}
	if t.err == nil && (l.stride == 0 || l.stride > 256) {
		t.err = fmt.Errorf("%s: entry size %d", stride, l.stride)
	}
	for _, o := range l.offs {
		if t.err == nil && o+8 > l.stride {
			t.err = fmt.Errorf("%s: a member at %d past the entry's %d bytes", table, o, l.stride)
		}
	}
	return l
}

// each calls fn with each entry's bytes until the entry whose first
// member (a name pointer) is NULL.
func (t *tableReader) each(l entryLayout, what string, fn func(e []byte) error) {
	if t.err != nil {
		return
	}
	e := make([]byte, l.stride)
	for i := uint64(0); ; i++ {
		if i >= maxEntries {
			t.err = fmt.Errorf("%s: more than %d entries", what, maxEntries)
			return
		}
		if err := t.m.read(e, l.base+i*l.stride); err != nil {
			t.err = fmt.Errorf("%s entry %d: %w", what, i, err)
			return
		}
		if le64(e[l.offs[0]:]) == 0 {
			return
		}
		if err := fn(e); err != nil {
			t.err = fmt.Errorf("%s entry %d: %w", what, i, err)
			return
		}
	}
}

func le64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// name reads a name the tables point to; names are C identifiers and
// types, never empty.
func (t *tableReader) name(p uint64) (string, error) {
	s, err := t.m.cstring(p, maxName)
	if err == nil && s == "" {
		err = fmt.Errorf("empty name at %#x", p)
	}
	return s, err
}

// readTables reads the four tables through the symbols' addresses.
func readTables(m *mem, sym map[string]uint64) (*Tables, error) {
	t := &tableReader{m: m, sym: sym}
	tb := &Tables{Fields: map[string]Field{}, Sizes: map[string]uint64{}, Supers: map[string]string{}, Constants: map[string]int64{}}
	fl := t.layout("gHotSpotVMStructs", "gHotSpotVMStructEntryArrayStride",
		"gHotSpotVMStructEntryTypeNameOffset", "gHotSpotVMStructEntryFieldNameOffset",
		"gHotSpotVMStructEntryTypeStringOffset", "gHotSpotVMStructEntryIsStaticOffset",
		"gHotSpotVMStructEntryOffsetOffset", "gHotSpotVMStructEntryAddressOffset")
	t.each(fl, "gHotSpotVMStructs", func(e []byte) error {
		typ, err := t.name(le64(e[fl.offs[0]:]))
		if err != nil {
			return err
		}
		field, err := t.name(le64(e[fl.offs[1]:]))
		if err != nil {
			return err
		}
		var f Field
		if p := le64(e[fl.offs[2]:]); p != 0 {
			f.Type, _ = t.m.cstring(p, maxName)
		}
		f.Static = e[fl.offs[3]] != 0
		f.Offset = le64(e[fl.offs[4]:])
		f.Address = le64(e[fl.offs[5]:])
		tb.Fields[typ+"::"+field] = f
		return nil
	})
	tl := t.layout("gHotSpotVMTypes", "gHotSpotVMTypeEntryArrayStride",
		"gHotSpotVMTypeEntryTypeNameOffset", "gHotSpotVMTypeEntrySuperclassNameOffset",
		"gHotSpotVMTypeEntrySizeOffset")
	t.each(tl, "gHotSpotVMTypes", func(e []byte) error {
		typ, err := t.name(le64(e[tl.offs[0]:]))
		if err != nil {
			return err
		}
		if p := le64(e[tl.offs[1]:]); p != 0 {
			tb.Supers[typ], _ = t.m.cstring(p, maxName)
		}
		tb.Sizes[typ] = le64(e[tl.offs[2]:])
		return nil
	})
	for _, k := range []struct {
		table, prefix string
		size          int
	}{{"gHotSpotVMIntConstants", "gHotSpotVMIntConstantEntry", 4}, {"gHotSpotVMLongConstants", "gHotSpotVMLongConstantEntry", 8}} {
		cl := t.layout(k.table, k.prefix+"ArrayStride", k.prefix+"NameOffset", k.prefix+"ValueOffset")
		t.each(cl, k.table, func(e []byte) error {
			n, err := t.name(le64(e[cl.offs[0]:]))
			if err != nil {
				return err
			}
			v := int64(le64(e[cl.offs[1]:]))
			if k.size == 4 {
				v = int64(int32(uint32(v)))
			}
			tb.Constants[n] = v
			return nil
		})
	}
	if t.err != nil {
		return nil, t.err
	}
	return tb, nil
}
