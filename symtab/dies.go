package symtab

import (
	"bytes"
	"debug/dwarf"
	"encoding/binary"
	"sort"
	"stackshot/internal/bin"
)

// A unit's DIEs are mostly types, variables, parameters and call sites,
// none of which the symbolizer keeps, and debug/dwarf decodes every
// attribute of each of them into an allocated Entry: on a cold run that
// walk is half the CPU. The fast walk below reads the unit itself with
// its abbreviation table, steps over the attributes of the DIEs it does
// not need by their forms' sizes, and hands only the DIEs it keeps
// (functions, inlined subroutines, the scopes that qualify their names)
// to debug/dwarf, seeking its Reader to them, so their meaning stays
// debug/dwarf's. Anything it does not know (a form, an address size, a
// DIE debug/dwarf reads differently) makes the caller walk the unit the
// slow way from its start: the answers are the same either way.

// Limits on abbreviation tables (.debug_abbrev is input like any other).
const (
	maxAbbrevs      = 1 << 16 // declarations in one table
	maxAbbrevFields = 1 << 10 // attributes of one declaration
	maxIndirect     = 4       // DW_FORM_indirect chain
)

// abbrevDecl is one abbreviation declaration: the tag, whether DIEs
// using it have children, their attributes' forms, and the bytes they
// take when all forms have a fixed size (-1 otherwise).
type abbrevDecl struct {
	tag      dwarf.Tag
	children bool
	forms    []uint32
	attrs    []uint32 // by form, as debug/dwarf keeps them (32 bits)
	consts   []int64  // by form, an implicit_const's value
	fixed    int
	name     int  // index in forms of the first DW_AT_name, -1 none
	code     bool // has DW_AT_low_pc, DW_AT_high_pc or DW_AT_ranges
}

// wanted reports whether the walk needs a DIE of this tag decoded.
func wanted(t dwarf.Tag) bool {
	switch t {
	case dwarf.TagNamespace, dwarf.TagClassType, dwarf.TagStructType, dwarf.TagUnionType,
		dwarf.TagSubprogram, dwarf.TagInlinedSubroutine:
		return true
	}
	return false
}

// uleb reads an unsigned LEB128 at b[p:] (a varint, as encoding/binary
// reads them); ok false past the end or for more than 64 bits.
func uleb(b []byte, p int) (v uint64, next int, ok bool) {
	if p < 0 || p >= len(b) {
		return 0, p, false
	}
	v, n := binary.Uvarint(b[p:])
	if n <= 0 {
		return 0, p, false
	}
	return v, p + n, true
}

// sleb reads a signed LEB128 at b[p:]; ok false past the end or for
// more than 10 bytes.
func sleb(b []byte, p int) (v int64, next int, ok bool) {
	var shift uint
	for i := 0; i < 10; i++ {
		if p >= len(b) {
			return 0, p, false
		}
		c := b[p]
		p++
		v |= int64(c&0x7f) << shift
		shift += 7
		if c < 0x80 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, p, true
		}
	}
	return 0, p, false
}

// skipLEB steps over a LEB128 (signed or not) at b[p:].
func skipLEB(b []byte, p int) (int, bool) {
	for i := 0; i < 10; i++ {
		if p >= len(b) {
			return p, false
		}
		c := b[p]
		p++
		if c < 0x80 {
			return p, true
		}
	}
	return p, false
}

// formSize is the fixed size of a form in a unit with the given
// version, address and offset sizes; -1 for a variable size, -2 for a
// form the fast walk does not know.
func formSize(form uint32, vers uint16, addrSize, offSize int) int {
	switch form {
	case 0x01: // addr
		return addrSize
	case 0x0b, 0x0c, 0x11, 0x25, 0x29: // data1 flag ref1 strx1 addrx1
		return 1
	case 0x05, 0x12, 0x26, 0x2a: // data2 ref2 strx2 addrx2
		return 2
	case 0x27, 0x2b: // strx3 addrx3
		return 3
	case 0x06, 0x13, 0x28, 0x2c, 0x1c: // data4 ref4 strx4 addrx4 ref_sup4
		return 4
	case 0x07, 0x14, 0x20, 0x24: // data8 ref8 ref_sig8 ref_sup8
		return 8
	case 0x1e: // data16
		return 16
	case 0x19, 0x21: // flag_present implicit_const
		return 0
	case 0x0e, 0x17, 0x1d, 0x1f, 0x1f20, 0x1f21: // strp sec_offset strp_sup line_strp GNU_ref_alt GNU_strp_alt
		return offSize
	case 0x10: // ref_addr: an address in DWARF 2, an offset later
		if vers <= 2 {
			return addrSize
		}
		return offSize
	case 0x03, 0x04, 0x08, 0x09, 0x0a, 0x0d, 0x0f, 0x15, 0x16, 0x18, 0x1a, 0x1b, 0x22, 0x23:
		// block2 block4 string block block1 sdata udata ref_udata
		// indirect exprloc strx addrx loclistx rnglistx
		return -1
	}
	return -2
}

// abbrevTable is a unit's abbreviation declarations by code: codes are
// almost always small and dense, kept in a slice, the rest in a map.
type abbrevTable struct {
	dense  []abbrevDecl // by code; tag 0 for none
	sparse map[uint32]*abbrevDecl
}

// maxDenseCode is the largest code kept in abbrevTable.dense.
const maxDenseCode = 1 << 12

func (t *abbrevTable) get(code uint64) *abbrevDecl {
	// As debug/dwarf keys them: the code truncated to 32 bits.
	c := uint32(code)
	if c < uint32(len(t.dense)) {
		if a := &t.dense[c]; a.tag != 0 {
			return a
		}
		return nil
	}
	return t.sparse[c]
}

// parseAbbrevTable reads the abbreviation table at off of .debug_abbrev
// for a unit of the given version and sizes; ok false when it is
// malformed or uses a form the fast walk does not know.
func parseAbbrevTable(b []byte, off uint64, vers uint16, addrSize, offSize int) (*abbrevTable, bool) {
	if off > uint64(len(b)) {
		return nil, false
	}
	p := int(off)
	t := &abbrevTable{}
	forms := make([]uint32, 0, 256) // shared by the declarations, as are:
	attrs := make([]uint32, 0, 256)
	consts := make([]int64, 0, 256)
	for n := 0; n < maxAbbrevs; n++ {
		code, q, ok := uleb(b, p)
		if !ok {
			return nil, false
		}
		p = q
		if code == 0 {
			return t, true
		}
		tag, q, ok := uleb(b, p)
		if !ok || q >= len(b) || tag == 0 {
			return nil, false
		}
		a := abbrevDecl{tag: dwarf.Tag(tag), children: b[q] != 0, name: -1}
		p = q + 1
		first := len(forms)
		for k := 0; ; k++ {
			if k >= maxAbbrevFields {
				return nil, false
			}
			var attr, form uint64
			if attr, p, ok = uleb(b, p); !ok {
				return nil, false
			}
			if form, p, ok = uleb(b, p); !ok {
				return nil, false
			}
			if attr == 0 && form == 0 {
				break
			}
			var cv int64
			if form == 0x21 { // implicit_const: the value is here
				if cv, p, ok = sleb(b, p); !ok {
					return nil, false
				}
			}
			if form > 0xffff || formSize(uint32(form), vers, addrSize, offSize) == -2 {
				return nil, false
			}
			switch dwarf.Attr(attr) {
			case dwarf.AttrName:
				if a.name < 0 {
					a.name = len(forms) - first
				}
			case dwarf.AttrLowpc, dwarf.AttrHighpc, dwarf.AttrRanges:
				a.code = true
			}
			forms = append(forms, uint32(form))
			attrs = append(attrs, uint32(attr))
			consts = append(consts, cv)
		}
		a.forms = forms[first:len(forms):len(forms)]
		a.attrs = attrs[first:len(attrs):len(attrs)]
		a.consts = consts[first:len(consts):len(consts)]
		for _, f := range a.forms {
			sz := formSize(f, vers, addrSize, offSize)
			if sz < 0 {
				a.fixed = -1
				break
			}
			a.fixed += sz
		}
		// A later declaration of one code replaces the earlier, as in
		// debug/dwarf.
		c := uint32(code)
		switch {
		case c < maxDenseCode:
			if c >= uint32(len(t.dense)) {
				t.dense = append(t.dense, make([]abbrevDecl, int(c)+1-len(t.dense))...)
			}
			t.dense[c] = a
		default:
			if t.sparse == nil {
				t.sparse = map[uint32]*abbrevDecl{}
			}
			t.sparse[c] = &a
		}
	}
	return nil, false
}

// skipAttrs steps over the attribute values of a DIE declared by a,
// starting at p; ok false when they run past the end or use a form it
// does not know.
func skipAttrs(b []byte, p int, a *abbrevDecl, vers uint16, addrSize, offSize int, order binary.ByteOrder) (int, bool) {
	if a.fixed >= 0 {
		p += a.fixed
		return p, p <= len(b)
	}
	for _, f := range a.forms {
		var ok bool
		if p, ok = skipForm(b, p, f, vers, addrSize, offSize, order); !ok {
			return p, false
		}
	}
	return p, true
}

// skipForm steps over one attribute value of the given form at p.
func skipForm(b []byte, p int, form uint32, vers uint16, addrSize, offSize int, order binary.ByteOrder) (int, bool) {
	for hop := 0; ; hop++ {
		sz := formSize(form, vers, addrSize, offSize)
		if sz >= 0 {
			p += sz
			break
		}
		if sz == -2 || hop >= maxIndirect {
			return p, false
		}
		var ok bool
		var n uint64
		switch form {
		case 0x16: // indirect: the form comes first
			var v uint64
			if v, p, ok = uleb(b, p); !ok || v > 0xffff || v == 0x21 {
				return p, false
			}
			form = uint32(v)
			continue
		case 0x08: // string
			for p < len(b) && b[p] != 0 {
				p++
			}
			p++
		case 0x0a: // block1
			if p >= len(b) {
				return p, false
			}
			p += 1 + int(b[p])
		case 0x03: // block2
			if p+2 > len(b) {
				return p, false
			}
			p += 2 + int(order.Uint16(b[p:]))
		case 0x04: // block4
			if p+4 > len(b) {
				return p, false
			}
			n = uint64(order.Uint32(b[p:]))
			if n > uint64(len(b)) {
				return p, false
			}
			p += 4 + int(n)
		case 0x09, 0x18: // block, exprloc
			if n, p, ok = uleb(b, p); !ok || n > uint64(len(b)) {
				return p, false
			}
			p += int(n)
		default: // the LEB128 forms
			if p, ok = skipLEB(b, p); !ok {
				return p, false
			}
		}
		break
	}
	return p, p <= len(b)
}

// dieName reads the DW_AT_name of the DIE declared by a whose attributes
// start at p, for the forms whose meaning needs nothing of the unit
// (an inline string, an offset into .debug_str, .debug_line_str or the
// dwz file's strings); ok false for any other form, or a string that
// runs past its section, which debug/dwarf then reads.
func (x *dwarfIndex) dieName(b []byte, p int, a *abbrevDecl, h *unitHeader) (string, bool) {
	if a.name < 0 {
		return "", true
	}
	addrSize, offSize := int(h.addrSize), int(h.offSize)
	for i := 0; i < a.name; i++ {
		var ok bool
		if p, ok = skipForm(b, p, a.forms[i], h.vers, addrSize, offSize, x.order); !ok {
			return "", false
		}
	}
	cstr := func(sec []byte, off uint64) (string, bool) {
		if off >= uint64(len(sec)) {
			return "", false
		}
		s := sec[off:]
		n := bytes.IndexByte(s, 0)
		if n < 0 {
			return "", false
		}
		return string(s[:n]), true
	}
	readOff := func() (uint64, bool) {
		if p+offSize > len(b) {
			return 0, false
		}
		if offSize == 8 {
			return x.order.Uint64(b[p:]), true
		}
		return uint64(x.order.Uint32(b[p:])), true
	}
	switch a.forms[a.name] {
	case 0x08: // string
		if p > len(b) {
			return "", false
		}
		return cstr(b, uint64(p))
	case 0x0e: // strp
		if off, ok := readOff(); ok {
			return cstr(x.str, off)
		}
	case 0x1f: // line_strp
		if off, ok := readOff(); ok {
			return cstr(x.lineStr, off)
		}
	case 0x1f21: // GNU_strp_alt
		if off, ok := readOff(); ok && x.alt != nil {
			return cstr(x.alt.str, off)
		}
	}
	return "", false
}

// unitHeaders returns the headers of .debug_info's units, parsed on
// first need (always before dataFor patches a unit header).
func (x *dwarfIndex) unitHeaders() []unitHeader {
	x.headersOnce.Do(func() {
		x.headers, _ = parseUnitHeaders(x.info, x.order)
	})
	return x.headers
}

// unitHeaderAt returns the header of the unit whose first DIE is at die.
func (x *dwarfIndex) unitHeaderAt(die uint64) (unitHeader, bool) {
	hs := x.unitHeaders()
	i := sort.Search(len(hs), func(i int) bool { return hs[i].die >= die })
	if i < len(hs) && hs[i].die == die {
		return hs[i], true
	}
	return unitHeader{}, false
}

// walkFast walks the DIEs of the unit whose first DIE is cu (already read
// through r) into w, decoding through r only the DIEs it keeps. It
// returns false, having possibly added to w, when the walk must be done
// the slow way instead.
func (x *dwarfIndex) walkFast(cu *dwarf.Entry, r *dwarf.Reader, w *dieWalk) bool {
	h, ok := x.unitHeaderAt(uint64(cu.Offset))
	if !ok || !h.isCU || h.end > uint64(len(x.info)) || h.die >= h.end {
		return false
	}
	addrSize, offSize := int(h.addrSize), int(h.offSize)
	if addrSize != 1 && addrSize != 2 && addrSize != 4 && addrSize != 8 {
		return false
	}
	abbrevs, ok := parseAbbrevTable(x.abbrev, h.abbrevOff, h.vers, addrSize, offSize)
	if !ok {
		return false
	}
	// b is the unit (offsets in it are section offsets); the walk starts
	// at the unit DIE, which it steps over.
	b := x.info[:h.end]
	w.b, w.h, w.abbrevs = b, h, abbrevs
	// Room for the nodes the unit's size suggests (gcc's C++ units hold
	// one for every 160 bytes or so): growing the slices of a large unit
	// step by step copied them many times over.
	if est := min(int(h.end-h.die)/160, 1<<20); cap(w.dec.nodes) < est {
		w.dec.nodes = make([]fnNode, 0, est)
		w.nodeInfo = make([]nameInfo, 0, est)
	}
	p := int(h.die)
	code, p, ok := uleb(b, p)
	if !ok {
		return false
	}
	a := abbrevs.get(code)
	if a == nil || a.tag != cu.Tag || a.children != cu.Children {
		return false
	}
	if p, ok = skipAttrs(b, p, a, h.vers, addrSize, offSize, x.order); !ok {
		return false
	}
	for n := 0; n < maxUnitDIEs; n++ {
		if n%ctxCheckEvery == 0 {
			if err := x.expired(); err != nil {
				w.dec.err = err
				return true
			}
		}
		if p >= len(b) {
			return false // the unit ended inside the tree: as debug/dwarf reads it
		}
		off := p
		if code, p, ok = uleb(b, p); !ok {
			return false
		}
		if code == 0 {
			if w.end() {
				return true
			}
			continue
		}
		a := abbrevs.get(code)
		if a == nil {
			return false
		}
		if wanted(a.tag) {
			handled, more := w.quick(b, p, a, &h, dwarf.Offset(off))
			if !handled && x.entry(&w.e, b, p, a, &h, dwarf.Offset(off)) {
				handled, more = true, w.die(&w.e)
			}
			if !handled {
				w.viaReader++
				r.Seek(dwarf.Offset(off))
				e, err := r.Next()
				if err != nil || e == nil || e.Offset != dwarf.Offset(off) || e.Tag != a.tag || e.Children != a.children {
					return false
				}
				more = w.die(e)
			}
			if !more {
				return true
			}
		} else if !w.other(a.children, dwarf.Offset(off)) {
			return true
		}
		if p, ok = skipAttrs(b, p, a, h.vers, addrSize, offSize, x.order); !ok {
			return false
		}
	}
	return true
}

// quick takes a wanted DIE that needs nothing but its name, read without
// debug/dwarf: a scope (namespace, class, structure, union), whose name
// qualifies the names below it, or a subprogram without code (a
// declaration or an abstract instance), whose names are read only if a
// DIE with code refers to it (lazyName). It returns handled false for a
// DIE die must take; more false stops the walk.
func (w *dieWalk) quick(b []byte, p int, a *abbrevDecl, h *unitHeader, off dwarf.Offset) (handled, more bool) {
	prefix := w.scope[len(w.scope)-1]
	switch a.tag {
	case dwarf.TagNamespace, dwarf.TagClassType, dwarf.TagStructType, dwarf.TagUnionType:
		n, ok := w.x.dieName(b, p, a, h)
		if !ok {
			return false, true
		}
		return true, w.push(a.children, w.active[len(w.active)-1], scopeName(a.tag, prefix, n), off)
	case dwarf.TagSubprogram:
		if a.code {
			return false, true
		}
		// As die: no ranges, so nothing below has code.
		w.lazy = append(w.lazy, lazyDIE{off: off, scope: w.scopeID[len(w.scopeID)-1]})
		return true, w.push(a.children, -1, prefix, off)
	}
	return false, true
}

// dieAttrs are the attributes die and dieNameInfo read.
func dieAttr(a dwarf.Attr) bool {
	switch a {
	case dwarf.AttrName, dwarf.AttrLinkageName, attrMIPSLinkageName, dwarf.AttrAbstractOrigin, dwarf.AttrSpecification,
		dwarf.AttrLowpc, dwarf.AttrHighpc, dwarf.AttrRanges, dwarf.AttrEntrypc, dwarf.AttrCallFile, dwarf.AttrCallLine:
		return true
	}
	return false
}

// entry reads the DIE at off declared by a, its attributes starting at p,
// into e (reused): only the attributes die and dieNameInfo read, with the
// values and classes debug/dwarf gives them. ok false when one of them
// has a form whose value needs more of the unit (strx, addrx, rnglistx,
// indirect, ...) or runs past the end: debug/dwarf reads that DIE.
func (x *dwarfIndex) entry(e *dwarf.Entry, b []byte, p int, a *abbrevDecl, h *unitHeader, off dwarf.Offset) bool {
	*e = dwarf.Entry{Offset: off, Tag: a.tag, Children: a.children, Field: e.Field[:0]}
	for i, form := range a.forms {
		attr := dwarf.Attr(a.attrs[i])
		var ok bool
		if !dieAttr(attr) {
			if p, ok = skipForm(b, p, form, h.vers, int(h.addrSize), int(h.offSize), x.order); !ok {
				return false
			}
			continue
		}
		var val any
		var class dwarf.Class
		if val, class, p, ok = x.attrValue(b, p, form, a.consts[i], h); !ok {
			return false
		}
		if class == dwarf.ClassUnknown && attr == dwarf.AttrRanges {
			class = dwarf.ClassRangeListPtr
		}
		if class == dwarf.ClassConstant && h.vers < 4 && attr == dwarf.AttrRanges {
			class = dwarf.ClassRangeListPtr // DWARF 2 and 3: a constant offset
		}
		e.Field = append(e.Field, dwarf.Field{Attr: attr, Val: val, Class: class})
	}
	return p <= len(b)
}

// fixedAt reads an n-byte value at p in b (n 1, 2, 4 or 8).
func fixedAt(b []byte, p, n int, order binary.ByteOrder) (v uint64, next int, ok bool) {
	if p+n > len(b) {
		return 0, p, false
	}
	switch n {
	case 1:
		v = uint64(b[p])
	case 2:
		v = uint64(order.Uint16(b[p:]))
	case 4:
		v = uint64(order.Uint32(b[p:]))
	case 8:
		v = order.Uint64(b[p:])
	default:
		return 0, p, false
	}
	return v, p + n, true
}

// attrValue reads the value of one attribute of form at p in b, with the
// value and class debug/dwarf gives it (a sec_offset's class is
// ClassUnknown: the caller knows a range list's), and where the next one
// starts. konst is an implicit_const's value. ok false for a form whose
// value needs more of the unit, or one that runs past the end.
func (x *dwarfIndex) attrValue(b []byte, p int, form uint32, konst int64, h *unitHeader) (val any, class dwarf.Class, next int, ok bool) {
	addrSize, offSize := int(h.addrSize), int(h.offSize)
	order := x.order
	var v uint64
	class = dwarf.ClassConstant
	switch form {
	case 0x01: // addr
		v, p, ok = fixedAt(b, p, addrSize, order)
		val, class = v, dwarf.ClassAddress
	case 0x0b, 0x05, 0x06, 0x07: // data1 data2 data4 data8
		v, p, ok = fixedAt(b, p, formSize(form, h.vers, addrSize, offSize), order)
		val = int64(v)
	case 0x0d: // sdata
		var sv int64
		sv, p, ok = sleb(b, p)
		val = sv
	case 0x0f: // udata
		v, p, ok = uleb(b, p)
		val = int64(v)
	case 0x21: // implicit_const
		val, ok = konst, true
	case 0x17: // sec_offset
		v, p, ok = fixedAt(b, p, offSize, order)
		val, class = int64(v), dwarf.ClassUnknown
	case 0x11, 0x12, 0x13, 0x14: // ref1 ref2 ref4 ref8
		v, p, ok = fixedAt(b, p, formSize(form, h.vers, addrSize, offSize), order)
		val, class = dwarf.Offset(v)+dwarf.Offset(h.off), dwarf.ClassReference
	case 0x15: // ref_udata
		v, p, ok = uleb(b, p)
		val, class = dwarf.Offset(v)+dwarf.Offset(h.off), dwarf.ClassReference
	case 0x10: // ref_addr
		n := offSize
		if h.vers == 2 {
			n = addrSize
		}
		v, p, ok = fixedAt(b, p, n, order)
		val, class = dwarf.Offset(v), dwarf.ClassReference
	case 0x1f20: // GNU_ref_alt
		v, p, ok = fixedAt(b, p, offSize, order)
		val, class = int64(v), dwarf.ClassReferenceAlt
	case 0x1f21: // GNU_strp_alt
		v, p, ok = fixedAt(b, p, offSize, order)
		val, class = int64(v), dwarf.ClassStringAlt
	case 0x08: // string
		var s string
		if s, ok = bin.CString(b, uint64(p)); ok {
			p += len(s) + 1
		}
		val, class = s, dwarf.ClassString
	case 0x0e, 0x1f: // strp line_strp
		if v, p, ok = fixedAt(b, p, offSize, order); ok {
			sec := x.str
			if form == 0x1f {
				sec = x.lineStr
			}
			val, ok = bin.CString(sec, v)
		}
		class = dwarf.ClassString
	}
	return val, class, p, ok
}
