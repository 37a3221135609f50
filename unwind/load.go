package unwind

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"

	"stackshot/internal/bin"
	"stackshot/internal/contain"
	"stackshot/internal/safeelf"
)

const maxSectionSize = 256 << 20 // cap on a frame section read from a segment

// LoadTable compiles the call-frame information of an ELF file: .eh_frame
// (found by section header, or through PT_GNU_EH_FRAME and .eh_frame_hdr
// when the file has no section headers, as a vdso image or a stripped core
// mapping may not), then .debug_frame from bin and from the separate debug
// file debug (nil if none). Where two sources cover the same address,
// .eh_frame wins. bin may be an in-memory image (bytes.NewReader).
//
// Malformed entries are skipped; LoadTable fails only when nothing usable
// was found (ErrNoCFI when there was no CFI at all).
//
// The files are hostile input: they are checked before debug/elf parses
// them and every section is read within a fresh default budget (see
// LoadTableLimited to share one).
func LoadTable(bin io.ReaderAt, debug io.ReaderAt) (t *Table, err error) {
	return LoadTableLimited(nil, bin, debug, nil)
}

// LoadTableLimited is LoadTable reading sections within budget b (shared
// with the symbolizer; nil: a fresh default one) and ctx (nil: no bound).
// The table's sections are given back to b once compiled.
func LoadTableLimited(ctx context.Context, binR io.ReaderAt, debug io.ReaderAt, b *safeelf.Budget) (t *Table, err error) {
	err = contain.Do("unwind", func() error {
		t, err = loadTable(ctx, binR, debug, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// loader reads the sections of one LoadTable call.
type loader struct {
	ctx   context.Context
	b     *safeelf.Budget
	taken int64
}

func (l *loader) open(r io.ReaderAt) (*safeelf.File, error) {
	if f := safeelf.Parsed(r); f != nil {
		// Parsed, and its headers charged, by its opener, who keeps it;
		// what this loader reads is charged to its own budget.
		c := *f
		c.Budget, c.Charged = l.b, 0
		return &c, nil
	}
	size, err := safeelf.Size(r)
	if err != nil {
		return nil, fmt.Errorf("unwind: %w", err)
	}
	f, err := safeelf.Open(r, size, l.b)
	if err != nil {
		return nil, fmt.Errorf("unwind: %w", err)
	}
	l.taken += f.Charged // the File is dropped with the loader
	return f, nil
}

func (l *loader) data(f *safeelf.File, s *elf.Section) ([]byte, error) {
	d, err := f.Data(l.ctx, s)
	if err == nil {
		l.taken += int64(len(d))
	}
	return d, err
}

func loadTable(ctx context.Context, binR io.ReaderAt, debug io.ReaderAt, budget *safeelf.Budget) (*Table, error) {
	if budget == nil {
		budget = safeelf.NewBudget(0, 0)
	}
	l := &loader{ctx: ctx, b: budget}
	defer func() { budget.Give(l.taken) }()
	sf, err := l.open(binR)
	if err != nil {
		return nil, err
	}
	f := sf.File
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 && f.Machine != elf.EM_AARCH64 {
		return nil, fmt.Errorf("unwind: unsupported elf %v %v", f.Class, f.Machine)
	}
	b := newBuilder()
	var errs []error
	found := false
	if s, err := l.ehFrameSection(sf); err != nil {
		errs = append(errs, err)
	} else if s != nil {
		found = true
		if err := b.parseSection(s, 0); err != nil {
			errs = append(errs, err)
		}
	}
	if s := l.debugFrameSection(sf); s != nil {
		found = true
		if err := b.parseSection(s, 1); err != nil {
			errs = append(errs, err)
		}
	}
	if debug != nil {
		if df, err := l.open(debug); err == nil {
			if s := l.debugFrameSection(df); s != nil {
				found = true
				if err := b.parseSection(s, 2); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if !found {
		return nil, ErrNoCFI
	}
	if err := b.compile(); err != nil {
		errs = append(errs, err)
	}
	if b.t.Len() == 0 {
		if len(errs) > 0 {
			return nil, errs[0]
		}
		return nil, ErrNoCFI
	}
	return b.t, nil
}

// baseAddrs returns the text and data (GOT) addresses for textrel/datarel.
func baseAddrs(f *elf.File) (text, data uint64) {
	if s := f.Section(".text"); s != nil {
		text = s.Addr
	}
	if s := f.Section(".got"); s != nil {
		data = s.Addr
	}
	return
}

// readVaddr reads up to n bytes of the file image at virtual address vaddr,
// bounded by the PT_LOAD segment that contains it.
// The bytes are charged to b (nil: not charged) before they are allocated.
func readVaddr(f *elf.File, vaddr uint64, n uint64, b *safeelf.Budget) ([]byte, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || vaddr < p.Vaddr || vaddr-p.Vaddr >= p.Filesz {
			continue
		}
		avail := p.Filesz - (vaddr - p.Vaddr)
		if n > avail {
			n = avail
		}
		if n > maxSectionSize {
			n = maxSectionSize
		}
		if b != nil {
			if err := b.Take(int64(n)); err != nil {
				return nil, err
			}
		}
		buf := make([]byte, n)
		m, err := p.ReadAt(buf, int64(vaddr-p.Vaddr))
		if m == 0 && err != nil {
			if b != nil {
				b.Give(int64(n))
			}
			return nil, err
		}
		if b != nil {
			b.Give(int64(n - uint64(m)))
		}
		return buf[:m], nil
	}
	return nil, fmt.Errorf("unwind: address %#x not in a loaded segment", vaddr)
}

func derefFunc(f *elf.File) func(uint64) (uint64, bool) {
	return func(a uint64) (uint64, bool) {
		b, err := readVaddr(f, a, 8, nil)
		if err != nil || len(b) < 8 {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b), true
	}
}

// ehFrameSection finds .eh_frame by section header or through the
// PT_GNU_EH_FRAME segment (.eh_frame_hdr), whose eh_frame_ptr locates it.
func (l *loader) ehFrameSection(sf *safeelf.File) (*frameSection, error) {
	f := sf.File
	text, data := baseAddrs(f)
	if s := f.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		d, err := l.data(sf, s)
		if err != nil {
			return nil, fmt.Errorf("unwind: .eh_frame: %w", err)
		}
		return &frameSection{name: ".eh_frame", data: d, isEH: true, arm64: f.Machine == elf.EM_AARCH64,
			bases: ptrBases{section: s.Addr, text: text, data: data, deref: derefFunc(f)}}, nil
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_GNU_EH_FRAME {
			continue
		}
		hdr, err := readVaddr(f, p.Vaddr, min(p.Filesz, 1<<20), nil)
		if err != nil {
			return nil, fmt.Errorf("unwind: .eh_frame_hdr: %w", err)
		}
		r := reader{Reader: bin.Reader{B: hdr}}
		version := r.U8()
		ptrEnc := r.U8()
		r.U8() // fde_count_enc
		r.U8() // table_enc
		if version != 1 || !validEncoding(ptrEnc) || ptrEnc == dwEhPeOmit {
			return nil, &FormatError{Section: ".eh_frame_hdr", Msg: "bad header"}
		}
		pb := ptrBases{section: p.Vaddr, text: text, data: p.Vaddr, deref: derefFunc(f)}
		eh := r.encoded(ptrEnc, &pb, true)
		if r.Err() != nil {
			return nil, &FormatError{Section: ".eh_frame_hdr", Msg: "truncated"}
		}
		d, err := readVaddr(f, eh, maxSectionSize, l.b)
		l.taken += int64(len(d))
		if err != nil {
			return nil, fmt.Errorf("unwind: .eh_frame: %w", err)
		}
		return &frameSection{name: ".eh_frame", data: d, isEH: true, arm64: f.Machine == elf.EM_AARCH64,
			bases: ptrBases{section: eh, text: text, data: data, deref: derefFunc(f)}}, nil
	}
	return nil, nil
}

func (l *loader) debugFrameSection(sf *safeelf.File) *frameSection {
	f := sf.File
	s := f.Section(".debug_frame")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil
	}
	d, err := l.data(sf, s)
	if err != nil || len(d) == 0 {
		return nil
	}
	text, data := baseAddrs(f)
	return &frameSection{name: ".debug_frame", data: d, arm64: f.Machine == elf.EM_AARCH64, bases: ptrBases{text: text, data: data}}
}
