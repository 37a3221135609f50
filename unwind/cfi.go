package unwind

// Call-frame information: DWARF 5 §6.4 (.debug_frame; CIE versions 1, 3
// and 4, 32- and 64-bit lengths) and the LSB's .eh_frame/.eh_frame_hdr
// (augmentations z, R, P, L, S, pointer encodings DW_EH_PE_*). Every FDE's
// program is run once and compiled into Table rows.
//
// Robustness: the input is target-controlled. Entries are bounded by their
// declared length, the remember-state stack is fixed, offsets that do not
// fit the compact rules become RuleBad, FDE and row counts are capped, and
// a malformed FDE is dropped whole (FormatError names section and offset)
// without losing the others. FuzzCFI exercises all of it.

import (
	"errors"
	"fmt"
	"slices"
	"stackshot/internal/bin"
	"sync"
)

// Call-frame instructions, DWARF 5 §6.4.2, plus the GNU extensions.
const (
	DW_CFA_advance_loc = 0x40 // high 2 bits
	DW_CFA_offset      = 0x80 // high 2 bits
	DW_CFA_restore     = 0xc0 // high 2 bits

	DW_CFA_nop                          = 0x00
	DW_CFA_set_loc                      = 0x01
	DW_CFA_advance_loc1                 = 0x02
	DW_CFA_advance_loc2                 = 0x03
	DW_CFA_advance_loc4                 = 0x04
	DW_CFA_offset_extended              = 0x05
	DW_CFA_restore_extended             = 0x06
	DW_CFA_undefined                    = 0x07
	DW_CFA_same_value                   = 0x08
	DW_CFA_register                     = 0x09
	DW_CFA_remember_state               = 0x0a
	DW_CFA_restore_state                = 0x0b
	DW_CFA_def_cfa                      = 0x0c
	DW_CFA_def_cfa_register             = 0x0d
	DW_CFA_def_cfa_offset               = 0x0e
	DW_CFA_def_cfa_expression           = 0x0f
	DW_CFA_expression                   = 0x10
	DW_CFA_offset_extended_sf           = 0x11
	DW_CFA_def_cfa_sf                   = 0x12
	DW_CFA_def_cfa_offset_sf            = 0x13
	DW_CFA_val_offset                   = 0x14
	DW_CFA_val_offset_sf                = 0x15
	DW_CFA_val_expression               = 0x16
	DW_CFA_MIPS_advance_loc8            = 0x1d
	DW_CFA_GNU_window_save              = 0x2d
	DW_CFA_GNU_args_size                = 0x2e
	DW_CFA_GNU_negative_offset_extended = 0x2f
)

// FormatError reports malformed call-frame information (the project's one
// format error, shared with symtab).
type FormatError = bin.FormatError

// ErrNoCFI is returned by LoadTable when a file carries no call-frame information.
var ErrNoCFI = errors.New("no call frame information")

const (
	maxRememberDepth = 32      // DW_CFA_remember_state nesting
	maxFDEs          = 1 << 22 // per module
	maxRows          = 1 << 24 // per module
	maxExprs         = 1 << 20
	noRow            = ^uint32(0)
)

// frameSection is one .eh_frame or .debug_frame with its addressing context.
type frameSection struct {
	name  string
	data  []byte
	isEH  bool
	bases ptrBases // section = vaddr of data[0]
	arm64 bool     // an aarch64 module's (EM_AARCH64): see arm64Slot
}

type cie struct {
	off       int
	codeAlign uint64
	dataAlign int64
	fdeEnc    uint8
	hasZ      bool
	signal    bool
	initial   []byte
	init      ruleSet // row after the initial instructions
	err       error
	arm64     bool // the section is an aarch64 module's: registers go to their arm64 slots
}

type fde struct {
	begin, end uint64
	code       []byte
	cie        *cie
	sec        *frameSection
	off        int
	prio       int
	seq        int // order of discovery: the tie-break that keeps sorting deterministic
}

// parseSection splits a frame section into CIEs and FDEs, appending the
// FDEs to fdes. Malformed entries are skipped when their length still lets
// the parser continue; the first error is returned alongside.
func (b *builder) parseSection(s *frameSection, prio int) error {
	var firstErr error
	note := func(off int, msg string) {
		if firstErr == nil {
			firstErr = &FormatError{Section: s.name, Offset: uint64(off), Msg: msg}
		}
	}
	cies := make(map[int]*cie)
	off := 0
	for off < len(s.data) {
		next, f, ok := b.entry(s, off, cies, note)
		if ok {
			if len(b.fdes) >= maxFDEs {
				note(off, "too many fdes")
				break
			}
			f.prio, f.seq = prio, len(b.fdes)
			b.fdes = append(b.fdes, f)
		}
		if next < 0 {
			break
		}
		off = next
	}
	return firstErr
}

// entry parses the CIE or FDE whose entry starts at off, noting problems
// through note. It returns the offset of the next entry (-1: stop, the
// section cannot be followed further) and the FDE when the entry is a
// usable one. CIEs are parsed once per offset, kept in cies.
func (b *builder) entry(s *frameSection, off int, cies map[int]*cie, note func(int, string)) (next int, f fde, ok bool) {
	r := newReader(s.data, off)
	start := off
	length := uint64(r.U32())
	is64 := false
	if length == 0xffffffff {
		length = r.U64()
		is64 = true
	}
	if r.Err() != nil {
		note(start, "truncated length")
		return -1, f, false
	}
	if length == 0 {
		if s.isEH {
			return -1, f, false // terminator
		}
		return r.Off, f, false
	}
	if length > uint64(r.Left()) {
		note(start, "entry length beyond section")
		return -1, f, false
	}
	bodyStart := r.Off
	end := r.Off + int(length)
	next = end
	er := newReader(s.data[:end], bodyStart)
	var id uint64
	if is64 {
		id = er.U64()
	} else {
		id = uint64(er.U32())
	}
	if er.Err() != nil {
		note(start, "truncated id")
		return next, f, false
	}
	isCIE := false
	var cieOff int
	if s.isEH {
		isCIE = id == 0
		if !isCIE {
			if id > uint64(bodyStart) {
				note(start, "cie pointer before section")
				return next, f, false
			}
			cieOff = bodyStart - int(id)
		}
	} else {
		isCIE = (!is64 && id == 0xffffffff) || (is64 && id == ^uint64(0))
		if !isCIE {
			if id >= uint64(len(s.data)) {
				note(start, "cie pointer beyond section")
				return next, f, false
			}
			cieOff = int(id)
		}
	}
	if isCIE {
		if _, ok := cies[start]; !ok {
			c := b.parseCIE(s, &er, start)
			cies[start] = c
			if c.err != nil {
				note(start, c.err.Error())
			}
		}
		return next, f, false
	}
	c, ok := cies[cieOff]
	if !ok {
		c = b.parseCIEAt(s, cieOff)
		cies[cieOff] = c
		if c.err != nil {
			note(cieOff, c.err.Error())
		}
	}
	if c.err != nil {
		return next, f, false
	}
	pb := s.bases
	begin := er.encoded(c.fdeEnc, &pb, true)
	rng := er.encoded(c.fdeEnc&0x0f, &pb, false)
	if c.hasZ {
		n := er.ULEB()
		er.Bytes(uint64(min(n, uint64(er.Left()+1))))
	}
	if er.Err() != nil {
		note(start, "truncated fde header")
		return next, f, false
	}
	if rng == 0 || begin+rng < begin {
		return next, f, false
	}
	return next, fde{begin: begin, end: begin + rng, code: s.data[er.Off:end], cie: c, sec: s, off: er.Off}, true
}

// parseCIEAt parses the CIE whose entry starts at off (a forward reference).
func (b *builder) parseCIEAt(s *frameSection, off int) *cie {
	bad := &cie{off: off, err: errors.New("bad cie reference")}
	if off < 0 || off >= len(s.data) {
		return bad
	}
	r := newReader(s.data, off)
	length := uint64(r.U32())
	is64 := length == 0xffffffff
	if is64 {
		length = r.U64()
	}
	if r.Err() != nil || length == 0 || length > uint64(r.Left()) {
		return bad
	}
	er := newReader(s.data[:r.Off+int(length)], r.Off)
	var id uint64
	if is64 {
		id = er.U64()
	} else {
		id = uint64(er.U32())
	}
	if s.isEH && id != 0 || !s.isEH && id != 0xffffffff && id != ^uint64(0) {
		return bad
	}
	return b.parseCIE(s, &er, off)
}

// parseCIE parses a CIE body (after its id) and runs its initial instructions.
func (b *builder) parseCIE(s *frameSection, r *reader, off int) *cie {
	c := &cie{off: off, arm64: s.arm64}
	version := r.U8()
	if version != 1 && version != 3 && version != 4 {
		c.err = fmt.Errorf("cie version %d", version)
		return c
	}
	aug := r.CString()
	addrSize := 8
	if len(aug) >= 2 && aug[0] == 'e' && aug[1] == 'h' {
		r.U64() // old GCC eh_data pointer
		aug = aug[2:]
	}
	if version >= 4 {
		addrSize = int(r.U8())
		r.U8() // segment selector size
		if addrSize != 4 && addrSize != 8 {
			c.err = fmt.Errorf("address size %d", addrSize)
			return c
		}
	}
	c.codeAlign = r.ULEB()
	c.dataAlign = r.SLEB()
	var ra uint64
	if version == 1 {
		ra = uint64(r.U8())
	} else {
		ra = r.ULEB()
	}
	if r.Err() != nil {
		c.err = errors.New("truncated cie")
		return c
	}
	if wantRA := uint64(RegRIP); c.arm64 && ra != 30 || !c.arm64 && ra != wantRA {
		c.err = fmt.Errorf("return address column %d", ra)
		return c
	}
	if c.codeAlign == 0 || c.codeAlign > 1<<16 || c.dataAlign == 0 || !fitsInt32(c.dataAlign) {
		c.err = errors.New("bad alignment factors")
		return c
	}
	if addrSize == 4 {
		c.fdeEnc = dwEhPeUdata4
	} else {
		c.fdeEnc = dwEhPeAbsptr
	}
	if len(aug) > 0 {
		if aug[0] != 'z' {
			c.err = fmt.Errorf("augmentation %q", aug)
			return c
		}
		c.hasZ = true
		n := r.ULEB()
		if n > uint64(r.Left()) {
			c.err = errors.New("augmentation data beyond cie")
			return c
		}
		ad := newReader(r.Bytes(n), 0)
		pb := s.bases
	augLoop:
		for _, ch := range aug[1:] {
			switch ch {
			case 'R':
				c.fdeEnc = ad.U8()
			case 'P':
				enc := ad.U8()
				if !validEncoding(enc) {
					c.err = errors.New("bad personality encoding")
					return c
				}
				ad.encoded(enc, &pb, false) // only its size matters here
			case 'L':
				ad.U8()
			case 'S':
				c.signal = true
			case 'B', 'G':
			default:
				break augLoop // 'z' lets us skip what we do not know
			}
		}
		if ad.Err() != nil {
			c.err = errors.New("truncated augmentation data")
			return c
		}
		if !validEncoding(c.fdeEnc) || c.fdeEnc == dwEhPeOmit {
			c.err = fmt.Errorf("fde pointer encoding %#x", c.fdeEnc)
			return c
		}
	}
	c.initial = r.B[r.Off:]
	// The initial row: the CFA and RA rules come from the initial
	// instructions; everything else is unset.
	c.init.Signal = c.signal
	v := getVM()
	defer vmPool.Put(v)
	v.st, v.initial = &c.init, nil
	if err := b.execute(v, c, c.initial, nil, 0, 0); err != nil {
		c.err = fmt.Errorf("initial instructions: %w", err)
	}
	return c
}

// vm is the call-frame instruction interpreter's state.
type vm struct {
	st      *ruleSet
	initial *ruleSet // the CIE's initial row (nil while running the CIE)
	stack   [maxRememberDepth]ruleSet
	depth   int
	row     ruleSet // the row an FDE's program builds (st points at it)
}

// vmPool holds interpreters: one is 5 KB (its remember stack), which on
// the stack grew the goroutine's (copied twice over on a dump's first
// unwind) and on the heap is garbage per FDE compiled.
var vmPool = sync.Pool{New: func() any { return new(vm) }}

// getVM returns a pooled interpreter with an empty remember stack.
func getVM() *vm {
	v := vmPool.Get().(*vm)
	v.st, v.initial, v.depth = nil, nil, 0
	return v
}

var (
	errRememberOverflow  = errors.New("remember_state stack overflow")
	errRememberUnderflow = errors.New("restore_state with empty stack")
	errBadOpcode         = errors.New("unknown call frame instruction")
	errLocBackwards      = errors.New("set_loc moves backwards")
	errRestoreInCIE      = errors.New("restore in cie")
)

// execute runs a CFA program. For an FDE (f != nil) it emits a row for each
// address interval [loc, next loc) within [f.begin, f.end).
func (b *builder) execute(v *vm, c *cie, code []byte, f *fde, loc, end uint64) error {
	r := newReader(code, 0)
	st := v.st
	advance := func(to uint64) bool {
		if f == nil {
			return true
		}
		if to < loc {
			return false
		}
		if to > loc {
			if loc < end {
				b.emit(loc, st)
			}
			loc = to
		}
		return true
	}
	slot := func(reg uint64) uint64 {
		if c.arm64 {
			return arm64Slot(reg)
		}
		return reg
	}
	setReg := func(reg uint64, rule Rule) {
		reg = slot(reg)
		if reg < NumRegs {
			st.Regs[reg] = rule
		}
	}
	offRule := func(kind RuleKind, v int64) Rule {
		if !fitsInt32(v) {
			return Rule{Kind: RuleBad}
		}
		return Rule{Kind: kind, Off: int32(v)}
	}
	for r.Left() > 0 && r.Err() == nil {
		if f != nil && loc >= end {
			break
		}
		op := r.U8()
		switch op & 0xc0 {
		case DW_CFA_advance_loc:
			if !advance(loc + uint64(op&0x3f)*c.codeAlign) {
				return errLocBackwards
			}
			continue
		case DW_CFA_offset:
			setReg(uint64(op&0x3f), offRule(RuleOffset, int64(r.ULEB())*c.dataAlign))
			continue
		case DW_CFA_restore:
			if v.initial == nil {
				return errRestoreInCIE
			}
			if reg := slot(uint64(op & 0x3f)); reg < NumRegs {
				st.Regs[reg] = v.initial.Regs[reg]
			}
			continue
		}
		switch op {
		case DW_CFA_nop:
		case DW_CFA_set_loc:
			if f == nil {
				return errBadOpcode
			}
			pb := f.sec.bases
			pb.section += uint64(f.off)
			if !advance(r.encoded(c.fdeEnc, &pb, true)) {
				return errLocBackwards
			}
		case DW_CFA_advance_loc1:
			if !advance(loc + uint64(r.U8())*c.codeAlign) {
				return errLocBackwards
			}
		case DW_CFA_advance_loc2:
			if !advance(loc + uint64(r.U16())*c.codeAlign) {
				return errLocBackwards
			}
		case DW_CFA_advance_loc4:
			if !advance(loc + uint64(r.U32())*c.codeAlign) {
				return errLocBackwards
			}
		case DW_CFA_MIPS_advance_loc8:
			if !advance(loc + r.U64()*c.codeAlign) {
				return errLocBackwards
			}
		case DW_CFA_offset_extended:
			reg := r.ULEB()
			setReg(reg, offRule(RuleOffset, int64(r.ULEB())*c.dataAlign))
		case DW_CFA_offset_extended_sf:
			reg := r.ULEB()
			setReg(reg, offRule(RuleOffset, r.SLEB()*c.dataAlign))
		case DW_CFA_GNU_negative_offset_extended:
			reg := r.ULEB()
			setReg(reg, offRule(RuleOffset, -int64(r.ULEB())*c.dataAlign))
		case DW_CFA_val_offset:
			reg := r.ULEB()
			setReg(reg, offRule(RuleValOffset, int64(r.ULEB())*c.dataAlign))
		case DW_CFA_val_offset_sf:
			reg := r.ULEB()
			setReg(reg, offRule(RuleValOffset, r.SLEB()*c.dataAlign))
		case DW_CFA_restore_extended:
			reg := slot(r.ULEB())
			if v.initial == nil {
				return errRestoreInCIE
			}
			if reg < NumRegs {
				st.Regs[reg] = v.initial.Regs[reg]
			}
		case DW_CFA_undefined:
			setReg(r.ULEB(), Rule{Kind: RuleUndefined})
		case DW_CFA_same_value:
			setReg(r.ULEB(), Rule{Kind: RuleSame})
		case DW_CFA_register:
			reg := r.ULEB()
			src := slot(r.ULEB())
			if src < NumRegs {
				setReg(reg, Rule{Kind: RuleRegister, Reg: uint8(src)})
			} else {
				setReg(reg, Rule{Kind: RuleBad})
			}
		case DW_CFA_remember_state:
			if v.depth >= maxRememberDepth {
				return errRememberOverflow
			}
			v.stack[v.depth] = *st
			v.depth++
		case DW_CFA_restore_state:
			if v.depth == 0 {
				return errRememberUnderflow
			}
			v.depth--
			// The CFA is part of the remembered row (DWARF 5 §6.4.2.4).
			*st = v.stack[v.depth]
		case DW_CFA_def_cfa:
			reg := slot(r.ULEB())
			off := r.ULEB()
			st.CFA = cfaRule(reg, int64(off))
		case DW_CFA_def_cfa_sf:
			reg := slot(r.ULEB())
			off := r.SLEB() * c.dataAlign
			st.CFA = cfaRule(reg, off)
		case DW_CFA_def_cfa_register:
			reg := slot(r.ULEB())
			off := int64(0)
			if st.CFA.Kind == RuleCFAReg {
				off = int64(st.CFA.Off)
			}
			st.CFA = cfaRule(reg, off)
		case DW_CFA_def_cfa_offset:
			off := r.ULEB()
			if st.CFA.Kind == RuleCFAReg {
				st.CFA = cfaRule(uint64(st.CFA.Reg), int64(off))
			} else {
				st.CFA = Rule{Kind: RuleBad}
			}
		case DW_CFA_def_cfa_offset_sf:
			off := r.SLEB() * c.dataAlign
			if st.CFA.Kind == RuleCFAReg {
				st.CFA = cfaRule(uint64(st.CFA.Reg), off)
			} else {
				st.CFA = Rule{Kind: RuleBad}
			}
		case DW_CFA_def_cfa_expression:
			n := r.ULEB()
			e := r.Bytes(uint64(min(n, uint64(r.Left()+1))))
			if r.Err() == nil {
				st.CFA = b.exprRule(RuleCFAExpr, e)
			}
		case DW_CFA_expression, DW_CFA_val_expression:
			reg := slot(r.ULEB())
			n := r.ULEB()
			e := r.Bytes(uint64(min(n, uint64(r.Left()+1))))
			if r.Err() == nil && reg < NumRegs {
				kind := RuleExpr
				if op == DW_CFA_val_expression {
					kind = RuleValExpr
				}
				st.Regs[reg] = b.exprRule(kind, e)
			}
		case DW_CFA_GNU_args_size:
			r.ULEB() // the caller's outgoing argument area; the CFA already accounts for it
		case DW_CFA_GNU_window_save:
			// SPARC register windows; on AArch64, DW_CFA_AARCH64_negate_ra_state:
			// the return address is signed from here. The arm64 walk strips
			// the PAC bits of every return address (Input.PACMask), signed
			// or not, so the state needs no column of its own.
		default:
			return fmt.Errorf("%w %#x", errBadOpcode, op)
		}
	}
	if r.Err() != nil {
		return r.Err()
	}
	if f != nil && loc < end {
		b.emit(loc, st)
	}
	return nil
}

func cfaRule(reg uint64, off int64) Rule {
	if reg >= NumRegs || !fitsInt32(off) {
		return Rule{Kind: RuleBad}
	}
	return Rule{Kind: RuleCFAReg, Reg: uint8(reg), Off: int32(off)}
}

// builder compiles FDEs into a Table.
type builder struct {
	t       *Table
	fdes    []fde
	setIdx  map[uint64]uint32 // ruleSet hash -> newest set with that hash
	setNext []uint32          // older set with the same hash, or noRow
	exprIdx map[string]int32
	lastSet uint32
	rowErr  error
}

func newBuilder() *builder {
	return &builder{t: &Table{}, setIdx: make(map[uint64]uint32), exprIdx: make(map[string]int32), lastSet: noRow}
}

func (b *builder) exprRule(kind RuleKind, e []byte) Rule {
	if i, ok := b.exprIdx[string(e)]; ok {
		return Rule{Kind: kind, Off: i}
	}
	if len(b.t.exprs) >= maxExprs {
		return Rule{Kind: RuleBad}
	}
	i := int32(len(b.t.exprs))
	b.t.exprs = append(b.t.exprs, e)
	b.exprIdx[string(e)] = i
	return Rule{Kind: kind, Off: i}
}

func (b *builder) intern(s *ruleSet) uint32 {
	s.Mask = 0
	for r := range s.Regs {
		if s.Regs[r].Kind != RuleUnset {
			s.Mask |= 1 << uint(r)
		}
	}
	if b.lastSet != noRow && b.t.rules[b.lastSet] == *s {
		return b.lastSet
	}
	h := s.hash()
	head, ok := b.setIdx[h]
	if ok {
		for i := head; i != noRow; i = b.setNext[i] {
			if b.t.rules[i] == *s {
				b.lastSet = i
				return i
			}
		}
	} else {
		head = noRow
	}
	i := uint32(len(b.t.rules))
	b.t.rules = append(b.t.rules, *s)
	b.setNext = append(b.setNext, head)
	b.setIdx[h] = i
	b.lastSet = i
	return i
}

// hash mixes a rule set into 64 bits (cheaper than hashing it as a map key).
func (s *ruleSet) hash() uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	mix := func(r Rule) {
		v := uint64(r.Kind) | uint64(r.Reg)<<8 | uint64(uint32(r.Off))<<32
		h = (h ^ v) * 0xff51afd7ed558ccd
		h ^= h >> 29
	}
	mix(s.CFA)
	for _, r := range s.Regs {
		mix(r)
	}
	if s.Signal {
		h = ^h
	}
	return h
}

// emit starts a row at addr with rule set s (or a gap if s is nil), dropping
// it when it equals its predecessor.
func (b *builder) emit(addr uint64, s *ruleSet) {
	idx := noRow
	if s != nil {
		idx = b.intern(s)
	}
	t := b.t
	n := len(t.addrs)
	if n > 0 {
		if t.sets[n-1] == idx {
			return
		}
		if t.addrs[n-1] >= addr {
			// Zero-length predecessor (only a gap can be replaced).
			t.sets[n-1] = idx
			if n > 1 && t.sets[n-2] == idx {
				t.addrs = t.addrs[:n-1]
				t.sets = t.sets[:n-1]
			}
			return
		}
	}
	if n >= maxRows {
		return
	}
	t.addrs = append(t.addrs, addr)
	t.sets = append(t.sets, idx)
}

// compile sorts the collected FDEs and runs each one's program.
func (b *builder) compile() error {
	fdes := b.fdes
	if !slices.IsSortedFunc(fdes, cmpFDE) {
		slices.SortFunc(fdes, cmpFDE)
	}
	var firstErr error
	var covered uint64 // end of the last compiled FDE
	first := true
	v := getVM()
	defer vmPool.Put(v)
	for i := range fdes {
		f := &fdes[i]
		if !first && f.begin < covered {
			continue // overlaps an earlier (or higher priority) FDE
		}
		if !first && f.begin > covered {
			b.emit(covered, nil)
		}
		v.row = f.cie.init
		v.st, v.initial, v.depth = &v.row, &f.cie.init, 0
		n := len(b.t.addrs)
		err := b.execute(v, f.cie, f.code, f, f.begin, f.end)
		if err != nil {
			// Drop the FDE's partial rows: a half-run program is wrong.
			b.t.addrs = b.t.addrs[:n]
			b.t.sets = b.t.sets[:n]
			b.lastSet = noRow
			if firstErr == nil {
				firstErr = &FormatError{Section: f.sec.name, Offset: uint64(f.off), Msg: err.Error()}
			}
			if !first {
				b.emit(covered, nil)
			}
			continue
		}
		first = false
		covered = f.end
	}
	if !first {
		b.emit(covered, nil)
	}
	return firstErr
}

func cmpFDE(a, b fde) int {
	switch {
	case a.begin < b.begin:
		return -1
	case a.begin > b.begin:
		return 1
	}
	if a.prio != b.prio {
		return a.prio - b.prio
	}
	return a.seq - b.seq
}
