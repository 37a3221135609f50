package unwind

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
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
func LoadTable(bin io.ReaderAt, debug io.ReaderAt) (t *Table, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("unwind: malformed elf: %v", p)
		}
	}()
	f, err := elf.NewFile(bin)
	if err != nil {
		return nil, fmt.Errorf("unwind: %w", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("unwind: unsupported elf %v %v", f.Class, f.Machine)
	}
	b := newBuilder()
	var errs []error
	found := false
	if s, err := ehFrameSection(f); err != nil {
		errs = append(errs, err)
	} else if s != nil {
		found = true
		if err := b.parseSection(s, 0); err != nil {
			errs = append(errs, err)
		}
	}
	if s := debugFrameSection(f); s != nil {
		found = true
		if err := b.parseSection(s, 1); err != nil {
			errs = append(errs, err)
		}
	}
	if debug != nil {
		if df, err := safeNewFile(debug); err == nil {
			if s := debugFrameSection(df); s != nil {
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

func safeNewFile(r io.ReaderAt) (f *elf.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("unwind: malformed elf: %v", p)
		}
	}()
	return elf.NewFile(r)
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
func readVaddr(f *elf.File, vaddr uint64, n uint64) ([]byte, error) {
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
		buf := make([]byte, n)
		m, err := p.ReadAt(buf, int64(vaddr-p.Vaddr))
		if m == 0 && err != nil {
			return nil, err
		}
		return buf[:m], nil
	}
	return nil, fmt.Errorf("unwind: address %#x not in a loaded segment", vaddr)
}

func derefFunc(f *elf.File) func(uint64) (uint64, bool) {
	return func(a uint64) (uint64, bool) {
		b, err := readVaddr(f, a, 8)
		if err != nil || len(b) < 8 {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b), true
	}
}

// ehFrameSection finds .eh_frame by section header or through the
// PT_GNU_EH_FRAME segment (.eh_frame_hdr), whose eh_frame_ptr locates it.
func ehFrameSection(f *elf.File) (*frameSection, error) {
	text, data := baseAddrs(f)
	if s := f.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		d, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("unwind: .eh_frame: %w", err)
		}
		return &frameSection{name: ".eh_frame", data: d, isEH: true,
			bases: ptrBases{section: s.Addr, text: text, data: data, deref: derefFunc(f)}}, nil
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_GNU_EH_FRAME {
			continue
		}
		hdr, err := readVaddr(f, p.Vaddr, min(p.Filesz, 1<<20))
		if err != nil {
			return nil, fmt.Errorf("unwind: .eh_frame_hdr: %w", err)
		}
		r := reader{b: hdr}
		version := r.u8()
		ptrEnc := r.u8()
		r.u8() // fde_count_enc
		r.u8() // table_enc
		if version != 1 || !validEncoding(ptrEnc) || ptrEnc == dwEhPeOmit {
			return nil, &FormatError{Section: ".eh_frame_hdr", Msg: "bad header"}
		}
		pb := ptrBases{section: p.Vaddr, text: text, data: p.Vaddr, deref: derefFunc(f)}
		eh := r.encoded(ptrEnc, &pb, true)
		if r.err != nil {
			return nil, &FormatError{Section: ".eh_frame_hdr", Msg: "truncated"}
		}
		d, err := readVaddr(f, eh, maxSectionSize)
		if err != nil {
			return nil, fmt.Errorf("unwind: .eh_frame: %w", err)
		}
		return &frameSection{name: ".eh_frame", data: d, isEH: true,
			bases: ptrBases{section: eh, text: text, data: data, deref: derefFunc(f)}}, nil
	}
	return nil, nil
}

func debugFrameSection(f *elf.File) *frameSection {
	s := f.Section(".debug_frame")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil
	}
	d, err := s.Data()
	if err != nil || len(d) == 0 {
		return nil
	}
	text, data := baseAddrs(f)
	return &frameSection{name: ".debug_frame", data: d, bases: ptrBases{text: text, data: data}}
}
