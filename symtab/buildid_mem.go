package symtab

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
)

// maxPhdrs bounds the program headers read from a target's memory.
const maxPhdrs = 256

// BuildIDFromMemory reads the GNU build id of the ELF image mapped at base,
// through mem (the target's memory): the ELF header, the program headers,
// then each PT_NOTE, every read bounded.
func BuildIDFromMemory(mem io.ReaderAt, base uint64) (string, error) {
	var eh [64]byte
	if _, err := mem.ReadAt(eh[:], int64(base)); err != nil {
		return "", fmt.Errorf("read elf header at %#x: %w", base, err)
	}
	if string(eh[:4]) != elf.ELFMAG {
		return "", fmt.Errorf("no elf header at %#x: %w", base, ErrNoBuildID)
	}
	var order binary.ByteOrder
	switch elf.Data(eh[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		order = binary.LittleEndian
	case elf.ELFDATA2MSB:
		order = binary.BigEndian
	default:
		return "", &FormatError{Msg: "bad EI_DATA"}
	}
	var phoff, phentsize, phnum, minEnt uint64
	is64 := false
	switch elf.Class(eh[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		is64 = true
		phoff = order.Uint64(eh[32:])
		phentsize = uint64(order.Uint16(eh[54:]))
		phnum = uint64(order.Uint16(eh[56:]))
		minEnt = 56
	case elf.ELFCLASS32:
		phoff = uint64(order.Uint32(eh[28:]))
		phentsize = uint64(order.Uint16(eh[42:]))
		phnum = uint64(order.Uint16(eh[44:]))
		minEnt = 32
	default:
		return "", &FormatError{Msg: "bad EI_CLASS"}
	}
	if phnum == 0 || phnum > maxPhdrs || phentsize < minEnt || phentsize > 256 || phoff > 1<<20 {
		return "", &FormatError{Msg: fmt.Sprintf("bad program headers (phoff %#x, %d x %d)", phoff, phnum, phentsize)}
	}
	ph := make([]byte, phnum*phentsize)
	if _, err := mem.ReadAt(ph, int64(base+phoff)); err != nil {
		return "", fmt.Errorf("read program headers at %#x: %w", base+phoff, err)
	}
	type seg struct{ typ, off, vaddr, filesz uint64 }
	segs := make([]seg, 0, phnum)
	for i := uint64(0); i < phnum; i++ {
		p := ph[i*phentsize:]
		var s seg
		s.typ = uint64(order.Uint32(p))
		if is64 {
			s.off = order.Uint64(p[8:])
			s.vaddr = order.Uint64(p[16:])
			s.filesz = order.Uint64(p[32:])
		} else {
			s.off = uint64(order.Uint32(p[4:]))
			s.vaddr = uint64(order.Uint32(p[8:]))
			s.filesz = uint64(order.Uint32(p[16:]))
		}
		segs = append(segs, s)
	}
	// The load bias: base maps the first PT_LOAD's first page.
	bias, haveLoad := uint64(0), false
	for _, s := range segs {
		if s.typ == uint64(elf.PT_LOAD) {
			bias = base - ((s.vaddr - s.off) &^ (pageSize - 1))
			haveLoad = true
			break
		}
	}
	for _, s := range segs {
		if s.typ != uint64(elf.PT_NOTE) || s.filesz == 0 {
			continue
		}
		n := s.filesz
		if n > maxNoteBytes {
			n = maxNoteBytes
		}
		addr := base + s.off
		if haveLoad {
			addr = bias + s.vaddr
		}
		buf := make([]byte, n)
		if _, err := mem.ReadAt(buf, int64(addr)); err != nil {
			continue
		}
		if id, ok := parseBuildIDNotes(buf, order); ok {
			return id, nil
		}
	}
	return "", ErrNoBuildID
}
