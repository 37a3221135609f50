// Package safeelf opens ELF files that a hostile process controls without
// letting them decide how much memory or time stackshot spends.
//
// The standard library's debug/elf is not hardened: elf.NewFile reads the
// section-name table through Section.Data, which decompresses an
// SHF_COMPRESSED table to whatever size its header claims (3 GiB from a
// 126 KB file), and Section.Data does the same for any section. Here every
// file is checked before debug/elf sees it (ELF header, program and section
// headers inside the file, a plain and modest section-name table), every
// section read goes through Data, which reads at most a fixed amount per
// section, charges a Budget shared by the whole run before it allocates,
// decompresses (zlib, zstd, legacy .zdebug) through a bounded reader, and
// honours a context between chunks; and every call is guarded against
// panics.
//
// Spec: ELF gABI (generic ABI 4.3, compression headers), the GNU .zdebug
// convention.
package safeelf

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"stackshot/internal/bin"
	"stackshot/internal/contain"
)

// Defaults for a Budget: they fit real debug files (a 57 MB compressed
// libcephfs debug file holds sections well under the per-section cap) and
// keep a run far from the memory a bomb asks for.
const (
	DefaultSectionBytes = 256 << 20 // one section, decompressed
	DefaultTotalBytes   = 512 << 20 // everything read from files in one run
)

// Structural limits (no real file comes near them).
const (
	maxSections    = 1 << 20  // section headers
	maxShstrtab    = 16 << 20 // section-name table
	maxProgs       = 1 << 16  // program headers
	readChunk      = 1 << 20  // bytes read between context checks
	chdr64Size     = 24
	chdr32Size     = 12
	zdebugHdrBytes = 12
)

// ErrBudget is the error of a read the Budget cannot cover.
var ErrBudget = errors.New("debug data budget exhausted")

// ErrTooLarge is the error of a section larger than the per-section cap.
var ErrTooLarge = errors.New("section larger than the per-section cap")

// Budget bounds the bytes read into memory from files, per section and in
// total; it is shared by every goroutine of a run. The zero value and nil
// mean the defaults (a fresh, private budget each call for nil).
type Budget struct {
	section int64
	total   int64
	used    atomic.Int64
}

// NewBudget returns a Budget of total bytes, at most section per section.
// Zero or negative mean the defaults; a total raised above its default
// raises the default per-section cap with it (to half the total), so one
// flag serves very large debug files.
func NewBudget(total, section int64) *Budget {
	if total <= 0 {
		total = DefaultTotalBytes
	}
	if section <= 0 {
		section = max(DefaultSectionBytes, total/2)
	}
	return &Budget{total: total, section: min(section, total)}
}

func (b *Budget) orDefault() *Budget {
	if b == nil {
		return NewBudget(0, 0)
	}
	if b.total == 0 {
		b.total, b.section = DefaultTotalBytes, DefaultSectionBytes
	}
	return b
}

// SectionCap is the per-section cap.
func (b *Budget) SectionCap() int64 { return b.orDefault().section }

// Used is the number of bytes charged so far.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Take charges n bytes, or fails without charging.
func (b *Budget) Take(n int64) error {
	if n < 0 {
		return ErrBudget
	}
	for {
		u := b.used.Load()
		if u+n > b.total || u+n < u {
			return fmt.Errorf("%w (%d of %d bytes used, %d more wanted)", ErrBudget, u, b.total, n)
		}
		if b.used.CompareAndSwap(u, u+n) {
			return nil
		}
	}
}

// Give returns n bytes taken earlier (data no longer held).
func (b *Budget) Give(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// Size returns the size of r: from a Size method (bytes.Reader,
// io.SectionReader) or a Stat method (*os.File).
func Size(r io.ReaderAt) (int64, error) {
	switch x := r.(type) {
	case interface{ Size() int64 }:
		return x.Size(), nil
	case interface{ Stat() (os.FileInfo, error) }:
		st, err := x.Stat()
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}
	return 0, errors.New("size of reader unknown")
}

// File is a checked, parsed ELF file.
type File struct {
	*elf.File
	R      io.ReaderAt
	Size   int64
	Budget *Budget
	// Charged is what Open charged to Budget for the headers; Release
	// gives it back when the File is dropped.
	Charged int64
}

// ReadAt reads the file's bytes: a File is the reader it parsed, and a
// reader of another package can take the parse along with the bytes (see
// Parsed) instead of parsing the headers again.
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.R.ReadAt(p, off) }

// Parsed returns the File r is, if it is one (nil otherwise): headers
// checked and parsed already, charged to the budget of whoever opened it.
func Parsed(r io.ReaderAt) *File {
	if f, ok := r.(*File); ok && f != nil && f.File != nil {
		return f
	}
	return nil
}

// Release gives the header charge back to the budget (the File is no
// longer held). Section data read with Data is the caller's to give back.
func (f *File) Release() {
	f.Budget.Give(f.Charged)
	f.Charged = 0
}

// Open checks r (size bytes) and parses it with debug/elf. The section
// headers and the section-name table are charged to b.
func Open(r io.ReaderAt, size int64, b *Budget) (*File, error) {
	b = b.orDefault()
	charge, err := Check(r, size)
	if err != nil {
		return nil, err
	}
	if err := b.Take(charge); err != nil {
		return nil, err
	}
	var ef *elf.File
	err = contain.Do("elf", func() error {
		var err error
		ef, err = elf.NewFile(r)
		return err
	})
	if err != nil {
		b.Give(charge)
		return nil, err
	}
	return &File{File: ef, R: r, Size: size, Budget: b, Charged: charge}, nil
}

// Check validates the ELF header, the program and section header tables
// and the section-name table of r against its size, before debug/elf reads
// any of it. It returns the bytes elf.NewFile will read into memory.
func Check(r io.ReaderAt, size int64) (int64, error) {
	var hdr [64]byte
	if size < 52 {
		return 0, &bin.FormatError{Msg: "file too small for an ELF header"}
	}
	n, err := r.ReadAt(hdr[:min(int64(len(hdr)), size)], 0)
	if n < 52 {
		return 0, fmt.Errorf("read elf header: %w", err)
	}
	if string(hdr[:4]) != elf.ELFMAG {
		return 0, &bin.FormatError{Msg: "bad magic number"}
	}
	var bo binary.ByteOrder
	switch elf.Data(hdr[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		bo = binary.BigEndian
	default:
		return 0, &bin.FormatError{Msg: "bad data encoding"}
	}
	var h header
	switch elf.Class(hdr[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		if n < 64 {
			return 0, &bin.FormatError{Msg: "short ELF64 header"}
		}
		h = header{is64: true,
			phoff: bo.Uint64(hdr[32:]), shoff: bo.Uint64(hdr[40:]),
			phentsize: uint64(bo.Uint16(hdr[54:])), phnum: uint64(bo.Uint16(hdr[56:])),
			shentsize: uint64(bo.Uint16(hdr[58:])), shnum: uint64(bo.Uint16(hdr[60:])),
			shstrndx: uint64(bo.Uint16(hdr[62:]))}
	case elf.ELFCLASS32:
		h = header{
			phoff: uint64(bo.Uint32(hdr[28:])), shoff: uint64(bo.Uint32(hdr[32:])),
			phentsize: uint64(bo.Uint16(hdr[42:])), phnum: uint64(bo.Uint16(hdr[44:])),
			shentsize: uint64(bo.Uint16(hdr[46:])), shnum: uint64(bo.Uint16(hdr[48:])),
			shstrndx: uint64(bo.Uint16(hdr[50:]))}
	default:
		return 0, &bin.FormatError{Msg: "bad class"}
	}
	h.bo, h.size, h.r = bo, uint64(size), r
	return h.check()
}

type header struct {
	is64             bool
	bo               binary.ByteOrder
	r                io.ReaderAt
	size             uint64
	phoff, shoff     uint64
	phentsize, phnum uint64
	shentsize, shnum uint64
	shstrndx         uint64
	batch            []byte // section headers read, from batchLo
	batchLo          uint64
}

// inFile reports whether [off, off+n) lies inside the file.
func (h *header) inFile(off, n uint64) bool {
	return off <= h.size && n <= h.size-off
}

// sectionHeader is the part of a section header checked here.
type sectionHeader struct {
	typ       elf.SectionType
	flags     elf.SectionFlag
	off, size uint64
	link      uint32
}

// headerBatch is how many section headers sectionAt reads at once.
const headerBatch = 1024

// sectionAt returns section header i, reading the table in batches (the
// headers are visited in order).
func (h *header) sectionAt(i uint64) (sectionHeader, error) {
	if i < h.batchLo || i >= h.batchLo+uint64(len(h.batch))/h.shentsize {
		n := min(headerBatch, h.shnum-i)
		if cap(h.batch) < int(n*h.shentsize) {
			h.batch = make([]byte, n*h.shentsize)
		}
		h.batch = h.batch[:n*h.shentsize]
		if _, err := h.r.ReadAt(h.batch, int64(h.shoff+i*h.shentsize)); err != nil {
			h.batch = h.batch[:0]
			return sectionHeader{}, fmt.Errorf("read section headers from %d: %w", i, err)
		}
		h.batchLo = i
	}
	off := (i - h.batchLo) * h.shentsize
	return h.decode(h.batch[off : off+h.shentsize]), nil
}

func (h *header) section(i uint64) (sectionHeader, error) {
	var b [64]byte
	ent := b[:h.shentsize]
	if _, err := h.r.ReadAt(ent, int64(h.shoff+i*h.shentsize)); err != nil {
		return sectionHeader{}, fmt.Errorf("read section header %d: %w", i, err)
	}
	return h.decode(ent), nil
}

func (h *header) decode(ent []byte) sectionHeader {
	bo := h.bo
	if h.is64 {
		return sectionHeader{typ: elf.SectionType(bo.Uint32(ent[4:])), flags: elf.SectionFlag(bo.Uint64(ent[8:])),
			off: bo.Uint64(ent[24:]), size: bo.Uint64(ent[32:]), link: bo.Uint32(ent[40:])}
	}
	return sectionHeader{typ: elf.SectionType(bo.Uint32(ent[4:])), flags: elf.SectionFlag(bo.Uint32(ent[8:])),
		off: uint64(bo.Uint32(ent[16:])), size: uint64(bo.Uint32(ent[20:])), link: bo.Uint32(ent[24:])}
}

func (h *header) check() (int64, error) {
	phWant, shWant := uint64(32), uint64(40)
	if h.is64 {
		phWant, shWant = 56, 64
	}
	charge := uint64(0)
	if h.phnum > 0 {
		if h.phentsize < phWant || h.phentsize > 256 || h.phnum > maxProgs || !h.inFile(h.phoff, h.phnum*h.phentsize) {
			return 0, &bin.FormatError{Section: "program headers", Offset: h.phoff, Msg: "outside the file or malformed"}
		}
		charge += h.phnum * 128 // headers and *elf.Prog values
	}
	if h.shoff == 0 {
		if h.shnum != 0 {
			return 0, &bin.FormatError{Msg: "section headers at offset 0"}
		}
		return int64(charge), nil
	}
	if h.shentsize != shWant {
		return 0, &bin.FormatError{Section: "section headers", Offset: h.shoff, Msg: "bad entry size"}
	}
	if !h.inFile(h.shoff, shWant) {
		return 0, &bin.FormatError{Section: "section headers", Offset: h.shoff, Msg: "outside the file"}
	}
	if h.shnum == 0 || h.shstrndx == uint64(elf.SHN_XINDEX) {
		// Extended numbering: the counts live in section 0.
		s0, err := h.section(0)
		if err != nil {
			return 0, err
		}
		if h.shnum == 0 {
			h.shnum = s0.size
		}
		if h.shstrndx == uint64(elf.SHN_XINDEX) {
			h.shstrndx = uint64(s0.link)
		}
	}
	if h.shnum > maxSections || !h.inFile(h.shoff, h.shnum*h.shentsize) {
		return 0, &bin.FormatError{Section: "section headers", Offset: h.shoff, Msg: fmt.Sprintf("%d headers do not fit the file", h.shnum)}
	}
	if h.shstrndx >= h.shnum && h.shnum > 0 {
		return 0, &bin.FormatError{Section: "section headers", Offset: h.shoff, Msg: "bad section-name table index"}
	}
	charge += h.shnum * (h.shentsize + 256) // raw headers and *elf.Section values
	for i := uint64(1); i < h.shnum; i++ {
		s, err := h.sectionAt(i)
		if err != nil {
			return 0, err
		}
		at := h.shoff + i*h.shentsize
		if s.typ == elf.SHT_NOBITS || s.typ == elf.SHT_NULL {
			continue
		}
		if !h.inFile(s.off, s.size) {
			return 0, &bin.FormatError{Section: "section header", Offset: at, Msg: fmt.Sprintf("section %d outside the file", i)}
		}
		if s.flags&elf.SHF_COMPRESSED != 0 {
			if s.flags&elf.SHF_ALLOC != 0 {
				return 0, &bin.FormatError{Section: "section header", Offset: at, Msg: fmt.Sprintf("section %d is allocated and compressed", i)}
			}
			if h.shstrndx == i {
				return 0, &bin.FormatError{Section: "section header", Offset: at, Msg: "compressed section-name table"}
			}
			chdr := uint64(chdr32Size)
			if h.is64 {
				chdr = chdr64Size
			}
			if s.size < chdr {
				return 0, &bin.FormatError{Section: "section header", Offset: at, Msg: fmt.Sprintf("section %d too small for its compression header", i)}
			}
		}
		if i == h.shstrndx {
			if s.typ != elf.SHT_STRTAB || s.size > maxShstrtab {
				return 0, &bin.FormatError{Section: "section header", Offset: at, Msg: "bad section-name table"}
			}
			charge += s.size
		}
	}
	return int64(charge), nil
}
