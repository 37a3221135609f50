package symtab

import (
	"bytes"
	"compress/flate"
	"debug/elf"
	"encoding/binary"
)

// Hostile ELF files, generated at test time: each is a small valid ELF64
// (.text with one function, bomb_func at 0x1000, named in .symtab) plus
// sections whose compressed data claims, and really decompresses to, far
// more than any limit (zero bytes, which compress to almost nothing).

// bombSection is one extra section of a generated ELF.
type bombSection struct {
	name  string
	typ   elf.SectionType
	flags elf.SectionFlag
	data  []byte
}

const (
	bombFuncAddr = 0x1000
	bombFuncSize = 0x100
)

// zstdZeros is a zstd frame of n zero bytes: one RLE block (4 bytes) per
// 128 KiB, so 3 GiB take 96 KiB.
func zstdZeros(n uint64) []byte {
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

// zlibZeros is a zlib stream of n zero bytes (n a multiple of 1 MiB):
// the deflate blocks of one MiB of zeros, ended by a sync flush so they
// repeat, then an empty final block and the Adler-32.
func zlibZeros(n uint64) []byte {
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

// compressed is a SHF_COMPRESSED section body: an Elf64_Chdr claiming
// size bytes, then the stream.
func compressed(typ elf.CompressionType, size uint64, stream []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(typ))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, size)
	b = binary.LittleEndian.AppendUint64(b, 1)
	return append(b, stream...)
}

// bombELF builds the ELF. shstr, when not nil, replaces the section-name
// table's body and flags (a compressed table).
func bombELF(extra []bombSection, shstr *bombSection) []byte {
	le := binary.LittleEndian
	text := bytes.Repeat([]byte{0xc3}, bombFuncSize)
	strtab := []byte("\x00bomb_func\x00")
	var symtab []byte
	symtab = append(symtab, make([]byte, 24)...) // null symbol
	sym := make([]byte, 24)
	le.PutUint32(sym[0:], 1)                                 // name
	sym[4] = byte(elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC)) // info
	le.PutUint16(sym[6:], 1)                                 // .text
	le.PutUint64(sym[8:], bombFuncAddr)                      // value
	le.PutUint64(sym[16:], bombFuncSize)                     // size
	symtab = append(symtab, sym...)

	secs := []bombSection{
		{name: ".text", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, data: text},
		{name: ".symtab", typ: elf.SHT_SYMTAB, data: symtab},
		{name: ".strtab", typ: elf.SHT_STRTAB, data: strtab},
	}
	secs = append(secs, extra...)
	var names []byte
	names = append(names, 0)
	nameOff := make([]uint32, len(secs)+1)
	for i, s := range secs {
		nameOff[i] = uint32(len(names))
		names = append(append(names, s.name...), 0)
	}
	nameOff[len(secs)] = uint32(len(names))
	names = append(append(names, ".shstrtab"...), 0)
	sh := bombSection{name: ".shstrtab", typ: elf.SHT_STRTAB, data: names}
	if shstr != nil {
		sh.flags, sh.data = shstr.flags, shstr.data
	}
	secs = append(secs, sh)

	out := make([]byte, 64)
	offs := make([]uint64, len(secs))
	for i, s := range secs {
		for len(out)%8 != 0 {
			out = append(out, 0)
		}
		offs[i] = uint64(len(out))
		out = append(out, s.data...)
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	shoff := uint64(len(out))
	out = append(out, make([]byte, 64)...) // null section
	for i, s := range secs {
		h := make([]byte, 64)
		le.PutUint32(h[0:], nameOff[i])
		le.PutUint32(h[4:], uint32(s.typ))
		le.PutUint64(h[8:], uint64(s.flags))
		if s.name == ".text" {
			le.PutUint64(h[16:], bombFuncAddr)
		}
		le.PutUint64(h[24:], offs[i])
		le.PutUint64(h[32:], uint64(len(s.data)))
		le.PutUint64(h[48:], 1)
		if s.typ == elf.SHT_SYMTAB {
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

// Bombs used by the tests and as fuzz seeds.
func shstrtabBomb() []byte {
	return bombELF(nil, &bombSection{flags: elf.SHF_COMPRESSED,
		data: compressed(elf.COMPRESS_ZSTD, 3<<30, zstdZeros(3<<30))})
}

func debugBomb(n int) []byte {
	names := []string{"info", "abbrev", "line", "str"}
	var extra []bombSection
	for i := 0; i < n; i++ {
		var data []byte
		if i%2 == 0 {
			data = compressed(elf.COMPRESS_ZSTD, 1<<30, zstdZeros(1<<30))
		} else {
			data = compressed(elf.COMPRESS_ZLIB, 1<<30, zlibZeros(1<<30))
		}
		extra = append(extra, bombSection{name: ".debug_" + names[i], typ: elf.SHT_PROGBITS, flags: elf.SHF_COMPRESSED, data: data})
	}
	return bombELF(extra, nil)
}
