package symtab

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"testing"
)

// fuzzGoELF is the ELF the discovery fuzz target searches: 1 MiB of code
// at 0x401000 (where syntheticPclntab's function lies).
func fuzzGoELF() *elf.File {
	return &elf.File{
		FileHeader: elf.FileHeader{Class: elf.ELFCLASS64, Data: elf.ELFDATA2LSB, ByteOrder: binary.LittleEndian},
		Progs:      []*elf.Prog{{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_X, Vaddr: 0x401000, Memsz: 1 << 20, Filesz: 1 << 20}}},
	}
}

// FuzzGoDiscovery feeds arbitrary bytes as a data segment of a Go binary
// without section headers: the pclntab header scan and its validation,
// the module data search, the frame-size reader and the build info
// parser must neither panic nor loop.
func FuzzGoDiscovery(f *testing.F) {
	le := binary.LittleEndian
	tab := syntheticPclntab()
	f.Add(append(bytes.Repeat([]byte{0xf1, 0xff, 0xff, 0xff, 0, 0}, 3), tab...))
	// The table, then a moduledata pointing at it (text, minpc, maxpc).
	md := make([]byte, 8*44)
	le.PutUint64(md, 0x600000)
	for _, i := range []int{mdMinPC, mdMinPC + 1, mdText, mdText + 1} {
		le.PutUint64(md[i*8:], 0x401000)
	}
	withMD := append(append([]byte(nil), tab...), make([]byte, (8-len(tab)%8)%8)...)
	f.Add(append(withMD, md...))
	info := append(append([]byte(nil), goBuildInfoMagic...), 8, 2)
	info = append(info, make([]byte, 16)...)
	info = append(info, 8)
	f.Add(append(info, "go1.19.8"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		ef := fuzzGoELF()
		segs := []dataSeg{{vaddr: 0x600000, data: data, writable: true}}
		h, addr := scanPclntab(ef, segs)
		if h != nil {
			if checkPclntabHeader(h, le) == nil {
				file := &openFile{ef: ef, r: bytes.NewReader(data), size: int64(len(data))}
				md, ok := moduledataAt(file, segs, le.Uint32(h), addr, addr+uint64(len(h)), int(h[7]))
				text := uint64(0x401000)
				if ok {
					text = md.text
				}
				if g := newGoFrames(h, le, text); g != nil {
					for d := uint64(0); d < 64; d += 3 {
						g.FrameSize(text + d)
					}
				}
			}
		}
		if i := bytes.Index(data, goBuildInfoMagic); i >= 0 {
			parseGoBuildInfo(data[i:], le, func(a, n uint64) []byte {
				if a < 0x600000 || a-0x600000 > uint64(len(data)) || n > uint64(len(data))-(a-0x600000) {
					return nil
				}
				return data[a-0x600000 : a-0x600000+n]
			})
		}
	})
}

// TestGoBuildInfo reads the Go version in both build info formats.
func TestGoBuildInfo(t *testing.T) {
	le := binary.LittleEndian
	inline := append(append([]byte(nil), goBuildInfoMagic...), 8, 2)
	inline = append(inline, make([]byte, 16)...)
	inline = append(append(inline, 8), "go1.19.8"...)
	if v := parseGoBuildInfo(inline, le, nil); v != "go1.19.8" {
		t.Errorf("inline strings: %q", v)
	}
	// Go 1.17 and older: a pointer to a string header.
	mem := map[uint64][]byte{0x5000: le.AppendUint64(le.AppendUint64(nil, 0x6000), 8), 0x6000: []byte("go1.16.3")}
	ptrs := append(append([]byte(nil), goBuildInfoMagic...), 8, 0)
	ptrs = le.AppendUint64(ptrs, 0x5000)
	ptrs = le.AppendUint64(ptrs, 0)
	read := func(a, n uint64) []byte {
		if b := mem[a]; uint64(len(b)) >= n {
			return b[:n]
		}
		return nil
	}
	if v := parseGoBuildInfo(ptrs, le, read); v != "go1.16.3" {
		t.Errorf("pointers: %q", v)
	}
	bad := append(append([]byte(nil), inline[:32]...), 8)
	bad = append(bad, "go1.\x01\x02xyz"...)
	if v := parseGoBuildInfo(bad, le, nil); v != "" {
		t.Errorf("control characters accepted: %q", v)
	}
	if v := parseGoBuildInfo(inline[:40], le, nil); v != "" {
		t.Errorf("truncated: %q", v)
	}
}
