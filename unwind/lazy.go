package unwind

// Lazy tables: a one-off dump looks up a dozen PCs, and compiling a
// library's whole .eh_frame for them (6–10 ms for libc) costs more than the
// rest of the dump. A lazy table finds the FDE for a PC through
// .eh_frame_hdr's binary search table (LSB, "Exception Frame Header") and
// runs only that FDE's program, with the same builder the compiled tables
// use, so its rows are the compiled table's rows for that FDE. Samplers,
// which look up thousands of PCs, keep compiling whole tables.
//
// Robustness: the search table is target-controlled like the rest. Only
// the fixed-size encoding every linker writes (DW_EH_PE_datarel |
// DW_EH_PE_sdata4) is searched, the table must fit its segment and be
// sorted, and FDE addresses are checked against .eh_frame; anything else
// falls back to compiling the whole table.

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"io"
	"sync"

	"stackshot/internal/bin"
	"stackshot/internal/contain"
	"stackshot/internal/safeelf"
)

// The .eh_frame_hdr search table encoding this file searches.
const dwEhPeDatarelSdata4 = 0x3b

// lazyCFI is the state of a lazy Table.
type lazyCFI struct {
	sec   *frameSection // .eh_frame
	table []byte        // the search table: count pairs (initial_loc, fde), sdata4, relative to base
	base  uint64        // vaddr of .eh_frame_hdr (datarel)
	count int

	mu   sync.Mutex
	fdes map[int]*Table // by search table index; nil: no usable FDE there

	fullOnce sync.Once
	full     *Table // the whole compiled table, for Rows

	// When src is set, sec.data starts zeroed (fresh memory the kernel
	// has not faulted in) and only the pages of the entries compiled are
	// read into it: a dump needs a dozen of libc's thousands of FDEs.
	src    io.ReaderAt // .eh_frame's bytes, from offset 0
	filled []uint64    // a bit per page of sec.data read from src
	srcErr bool        // a read failed: no more entries
}

const lazyPage = 4096

// fill reads the pages of sec.data holding [off, off+n) (clamped to the
// section) from src, once each; it reports false if a read failed. The
// caller holds mu.
func (l *lazyCFI) fill(off, n uint64) bool {
	size := uint64(len(l.sec.data))
	if l.src == nil || off >= size {
		return !l.srcErr
	}
	end := size
	if n < size-off {
		end = off + n
	}
	for p := off / lazyPage; p*lazyPage < end && !l.srcErr; p++ {
		if l.filled[p/64]&(1<<(p%64)) != 0 {
			continue
		}
		b := l.sec.data[p*lazyPage : min((p+1)*lazyPage, size)]
		if k, err := l.src.ReadAt(b, int64(p*lazyPage)); k != len(b) {
			_ = err
			l.srcErr = true
			break
		}
		l.filled[p/64] |= 1 << (p % 64)
	}
	return !l.srcErr
}

// fillEntry reads the entry at off (its length words, then all of it) and,
// for an FDE, its CIE: what builder.entry reads. The caller holds mu.
func (l *lazyCFI) fillEntry(off uint64, withCIE bool) bool {
	if !l.fill(off, 12) {
		return false
	}
	d := l.sec.data
	if off+4 > uint64(len(d)) {
		return true // (builder.entry says what is wrong)
	}
	length, hdr := uint64(binary.LittleEndian.Uint32(d[off:])), uint64(4)
	if length == 0xffffffff {
		if off+12 > uint64(len(d)) {
			return true
		}
		length, hdr = binary.LittleEndian.Uint64(d[off+4:]), 12
	}
	if length > uint64(len(d)) || !l.fill(off, hdr+length) {
		return !l.srcErr
	}
	body := off + hdr
	if !withCIE || length < 4 || body+4 > uint64(len(d)) {
		return true
	}
	var id uint64
	if hdr == 12 {
		if length < 8 || body+8 > uint64(len(d)) {
			return true
		}
		id = binary.LittleEndian.Uint64(d[body:])
	} else {
		id = uint64(binary.LittleEndian.Uint32(d[body:]))
	}
	if id == 0 || id > body {
		return true
	}
	return l.fillEntry(body-id, false)
}

// fillAll reads the rest of sec.data (the whole table is compiled).
func (l *lazyCFI) fillAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fill(0, uint64(len(l.sec.data)))
}

func (l *lazyCFI) entry(i int) (loc, fde uint64) {
	e := l.table[i*8:]
	loc = l.base + uint64(int64(int32(binary.LittleEndian.Uint32(e))))
	fde = l.base + uint64(int64(int32(binary.LittleEndian.Uint32(e[4:]))))
	return loc, fde
}

// search returns the index of the last entry whose initial location is at
// or below vaddr, or -1.
func (l *lazyCFI) search(vaddr uint64) int {
	lo, hi := 0, l.count
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if loc, _ := l.entry(m); loc <= vaddr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// fdeTable returns the compiled rows of the FDE at search table index i
// (nil if it has none), compiling it on first use.
func (l *lazyCFI) fdeTable(i int) *Table {
	l.mu.Lock()
	t, ok := l.fdes[i]
	l.mu.Unlock()
	if ok {
		return t
	}
	t = l.compileFDE(i)
	l.mu.Lock()
	l.fdes[i] = t
	l.mu.Unlock()
	return t
}

// compileFDE runs the program of the FDE at search table index i through
// a builder of its own (its CIE's expressions land in the FDE's table).
func (l *lazyCFI) compileFDE(i int) *Table {
	_, addr := l.entry(i)
	if addr < l.sec.bases.section || addr-l.sec.bases.section >= uint64(len(l.sec.data)) {
		return nil
	}
	off := int(addr - l.sec.bases.section)
	l.mu.Lock()
	ok := l.fillEntry(uint64(off), true)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	b := newBuilder()
	_, f, ok := b.entry(l.sec, off, make(map[int]*cie), func(int, string) {})
	if !ok {
		return nil
	}
	b.fdes = append(b.fdes, f)
	if b.compile() != nil || b.t.Len() == 0 {
		return nil
	}
	return b.t
}

// rowAt is the row in effect at vaddr: its rule set, its extent, and the
// table whose expression pool its rules index; nil if none.
func (t *Table) rowAt(vaddr uint64) (rs *ruleSet, start, end uint64, src *Table) {
	if l := t.lazy; l != nil {
		i := l.search(vaddr)
		if i < 0 {
			return nil, 0, 0, nil
		}
		ft := l.fdeTable(i)
		if ft == nil {
			return nil, 0, 0, nil
		}
		return ft.rowAt(vaddr)
	}
	rs, i := t.lookup(vaddr)
	if rs == nil {
		return nil, 0, 0, nil
	}
	end = ^uint64(0)
	if i+1 < len(t.addrs) {
		end = t.addrs[i+1]
	}
	return rs, t.addrs[i], end, t
}

// compiled returns the whole compiled table of a lazy table (compiling it
// on first use), or t itself.
func (t *Table) compiled() *Table {
	l := t.lazy
	if l == nil {
		return t
	}
	l.fullOnce.Do(func() {
		l.fillAll()
		b := newBuilder()
		err := contain.Do("unwind", func() error {
			b.parseSection(l.sec, 0)
			b.compile()
			return nil
		})
		if err == nil {
			l.full = b.t
		} else {
			l.full = &Table{}
		}
	})
	return l.full
}

// Lazy reports whether the table compiles FDEs on first use.
func (t *Table) Lazy() bool { return t != nil && t.lazy != nil }

// LoadTableLazy is LoadTableLimited(ctx, bin, nil, b) for a one-off
// unwind: when the file's .eh_frame_hdr has a search table that can be
// used (and the file has no .debug_frame, which the compiled table would
// merge in), the table it returns compiles only the FDEs looked up, each
// on first use. Otherwise it compiles the whole table. Either way Find
// answers the same rules for every address of a well-formed file
// (TestLazyMatchesCompiled); where FDEs overlap or the section is cut
// short, which the compiled table resolves by order, the lazy table takes
// the FDE the search table names.
func LoadTableLazy(ctx context.Context, binR io.ReaderAt, b *safeelf.Budget) (t *Table, err error) {
	err = contain.Do("unwind", func() error {
		t, err = loadLazy(ctx, binR, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	if t == nil {
		return LoadTableLimited(ctx, binR, nil, b)
	}
	return t, nil
}

// loadLazy returns a lazy table, or nil when the file needs compiling.
func loadLazy(ctx context.Context, binR io.ReaderAt, budget *safeelf.Budget) (*Table, error) {
	if budget == nil {
		budget = safeelf.NewBudget(0, 0)
	}
	// The sections are given back like a compiled table's: the lazy table
	// keeps .eh_frame and the search table (bounded by maxSectionSize).
	l := &loader{ctx: ctx, b: budget}
	defer func() { budget.Give(l.taken) }()
	sf, err := l.open(binR)
	if err != nil {
		return nil, err
	}
	f := sf.File
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 && f.Machine != elf.EM_AARCH64 {
		return nil, nil // LoadTableLimited says why
	}
	if s := f.Section(".debug_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		return nil, nil
	}
	var hdrAddr, hdrSize uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_GNU_EH_FRAME {
			hdrAddr, hdrSize = p.Vaddr, p.Filesz
			break
		}
	}
	if hdrSize < 4 {
		return nil, nil
	}
	hdr, err := readVaddr(f, hdrAddr, min(hdrSize, maxSectionSize), l.b)
	l.taken += int64(len(hdr))
	if err != nil {
		return nil, nil
	}
	r := reader{Reader: bin.Reader{B: hdr}}
	version := r.U8()
	ptrEnc := r.U8()
	countEnc := r.U8()
	tableEnc := r.U8()
	if version != 1 || !validEncoding(ptrEnc) || ptrEnc == dwEhPeOmit ||
		!validEncoding(countEnc) || countEnc == dwEhPeOmit || tableEnc != dwEhPeDatarelSdata4 {
		return nil, nil
	}
	text, _ := baseAddrs(f)
	pb := ptrBases{section: hdrAddr, text: text, data: hdrAddr, deref: derefFunc(f)}
	r.encoded(ptrEnc, &pb, true) // eh_frame_ptr: .eh_frame is found as the compiled table finds it
	count := r.encoded(countEnc, &pb, false)
	if r.Err() != nil || count == 0 || count > maxFDEs || count*8 > uint64(r.Left()) {
		return nil, nil
	}
	lz := &lazyCFI{table: hdr[r.Off : r.Off+int(count)*8], base: hdrAddr, count: int(count), fdes: map[int]*Table{}}
	prev := uint64(0)
	for i := range lz.count {
		loc, _ := lz.entry(i)
		if loc < prev {
			return nil, nil // unsorted: not searchable
		}
		prev = loc
	}
	if s := f.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS && s.Flags&elf.SHF_COMPRESSED == 0 {
		// Read page by page as entries are compiled (lazyCFI.fill),
		// within the same bounds and budget as a whole read.
		if s.Offset > uint64(sf.Size) || s.FileSize > uint64(sf.Size)-s.Offset ||
			s.FileSize > uint64(budget.SectionCap()) || budget.Take(int64(s.FileSize)) != nil {
			return nil, nil
		}
		l.taken += int64(s.FileSize)
		text, data := baseAddrs(f)
		lz.sec = &frameSection{name: ".eh_frame", data: make([]byte, s.FileSize), isEH: true, arm64: f.Machine == elf.EM_AARCH64,
			bases: ptrBases{section: s.Addr, text: text, data: data, deref: derefFunc(f)}}
		lz.src, lz.filled = s.ReaderAt, make([]uint64, (s.FileSize+lazyPage*64-1)/(lazyPage*64))
		return &Table{lazy: lz}, nil
	}
	sec, err := l.ehFrameSection(sf)
	if err != nil || sec == nil {
		return nil, nil
	}
	lz.sec = sec
	return &Table{lazy: lz}, nil
}
