package testutil

import (
	"bytes"
	"compress/flate"
	"debug/elf"
	"encoding/binary"
)

// Hostile ELF files, generated at test time (for symtab, unwind and the
// command's tests): each is a small valid ELF64 (.text with one function,
// bomb_func at BombFuncAddr, named in .symtab) plus sections whose
// compressed data claims, and really decompresses to, far more than any
// limit (zero bytes, which compress to almost nothing).

// ELFSection is one extra section of a generated ELF.
type ELFSection struct {
	Name  string
	Type  elf.SectionType
	Flags elf.SectionFlag
	Data  []byte
}

// Where BombELF puts bomb_func.
const (
	BombFuncAddr = 0x1000
	BombFuncSize = 0x100
)

// ZstdZeros is a zstd frame of n zero bytes: one RLE block (4 bytes) per
// 128 KiB, so 3 GiB take 96 KiB.
func ZstdZeros(n uint64) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0xFD2FB528)
	b = append(b, 0xE0) // 8-byte content size, single segment
	b = binary.LittleEndian.AppendUint64(b, n)
	const blk = 128 << 10
	for left := n; left > 0; {
		sz := min(left, blk)
		left -= sz
		last := uint32(0)
		if left == 0 {
			last = 1
		}
		h := uint32(sz)<<3 | 1<<1 | last // RLE block
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return b
}

// ZlibZeros is a zlib stream of n zero bytes (n a multiple of 1 MiB):
// the deflate blocks of one MiB of zeros, ended by a sync flush so they
// repeat, then an empty final block and the Adler-32.
func ZlibZeros(n uint64) []byte {
	var one bytes.Buffer
	w, _ := flate.NewWriter(&one, flate.BestCompression)
	w.Write(make([]byte, 1<<20))
	w.Flush()
	b := []byte{0x78, 0xda}
	for i := uint64(0); i < n>>20; i++ {
		b = append(b, one.Bytes()...)
	}
	b = append(b, 0x03, 0x00)
	// Adler-32 of zeros: a stays 1, b adds 1 per byte.
	return binary.BigEndian.AppendUint32(b, uint32(n%65521)<<16|1)
}

// Compressed is a SHF_COMPRESSED section body: an Elf64_Chdr claiming
// size bytes, then the stream.
func Compressed(typ elf.CompressionType, size uint64, stream []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(typ))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, size)
	b = binary.LittleEndian.AppendUint64(b, 1)
	return append(b, stream...)
}

// BombELF builds the ELF. shstr, when not nil, replaces the section-name
// table's body and flags (a compressed table).
func BombELF(extra []ELFSection, shstr *ELFSection) []byte {
	le := binary.LittleEndian
	text := bytes.Repeat([]byte{0xc3}, BombFuncSize)
	strtab := []byte("\x00bomb_func\x00")
	var symtab []byte
	symtab = append(symtab, make([]byte, 24)...) // null symbol
	sym := make([]byte, 24)
	le.PutUint32(sym[0:], 1)                                 // name
	sym[4] = byte(elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC)) // info
	le.PutUint16(sym[6:], 1)                                 // .text
	le.PutUint64(sym[8:], BombFuncAddr)                      // value
	le.PutUint64(sym[16:], BombFuncSize)                     // size
	symtab = append(symtab, sym...)

	secs := []ELFSection{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Data: text},
		{Name: ".symtab", Type: elf.SHT_SYMTAB, Data: symtab},
		{Name: ".strtab", Type: elf.SHT_STRTAB, Data: strtab},
	}
	secs = append(secs, extra...)
	var names []byte
	names = append(names, 0)
	nameOff := make([]uint32, len(secs)+1)
	for i, s := range secs {
		nameOff[i] = uint32(len(names))
		names = append(append(names, s.Name...), 0)
	}
	nameOff[len(secs)] = uint32(len(names))
	names = append(append(names, ".shstrtab"...), 0)
	sh := ELFSection{Name: ".shstrtab", Type: elf.SHT_STRTAB, Data: names}
	if shstr != nil {
		sh.Flags, sh.Data = shstr.Flags, shstr.Data
	}
	secs = append(secs, sh)

	out := make([]byte, 64)
	offs := make([]uint64, len(secs))
	for i, s := range secs {
		for len(out)%8 != 0 {
			out = append(out, 0)
		}
		offs[i] = uint64(len(out))
		out = append(out, s.Data...)
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	shoff := uint64(len(out))
	out = append(out, make([]byte, 64)...) // null section
	for i, s := range secs {
		h := make([]byte, 64)
		le.PutUint32(h[0:], nameOff[i])
		le.PutUint32(h[4:], uint32(s.Type))
		le.PutUint64(h[8:], uint64(s.Flags))
		if s.Name == ".text" {
			le.PutUint64(h[16:], BombFuncAddr)
		}
		le.PutUint64(h[24:], offs[i])
		le.PutUint64(h[32:], uint64(len(s.Data)))
		le.PutUint64(h[48:], 1)
		if s.Type == elf.SHT_SYMTAB {
			le.PutUint32(h[40:], 3) // .strtab
			le.PutUint32(h[44:], 1)
			le.PutUint64(h[56:], 24)
		}
		out = append(out, h...)
	}
	copy(out, []byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1})
	le.PutUint16(out[16:], uint16(elf.ET_DYN))
	le.PutUint16(out[18:], uint16(elf.EM_X86_64))
	le.PutUint32(out[20:], 1)
	le.PutUint64(out[40:], shoff)
	le.PutUint16(out[52:], 64)
	le.PutUint16(out[58:], 64)
	le.PutUint16(out[60:], uint16(len(secs)+1))
	le.PutUint16(out[62:], uint16(len(secs)))
	return out
}

// ShstrtabBomb is a 100 KB ELF whose section-name table is zstd
// compressed and claims (and holds) 3 GiB.
func ShstrtabBomb() []byte {
	return BombELF(nil, &ELFSection{Flags: elf.SHF_COMPRESSED,
		Data: Compressed(elf.COMPRESS_ZSTD, 3<<30, ZstdZeros(3<<30))})
}

// DebugBomb has n (at most 4) .debug_* sections, zstd and zlib in turn,
// claiming and holding 1 GiB each.
func DebugBomb(n int) []byte {
	names := []string{"info", "abbrev", "line", "str"}
	var extra []ELFSection
	for i := 0; i < n; i++ {
		var data []byte
		if i%2 == 0 {
			data = Compressed(elf.COMPRESS_ZSTD, 1<<30, ZstdZeros(1<<30))
		} else {
			data = Compressed(elf.COMPRESS_ZLIB, 1<<30, ZlibZeros(1<<30))
		}
		extra = append(extra, ELFSection{Name: ".debug_" + names[i], Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: data})
	}
	return BombELF(extra, nil)
}
