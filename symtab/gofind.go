package symtab

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"unicode/utf8"
)

// pclntab header magics (Go 1.20+, 1.18, 1.16), little-endian. Go 1.2's
// (0xfffffffb) is not searched for: its header is too short to validate.
var pclntabMagics = [][]byte{
	{0xf1, 0xff, 0xff, 0xff, 0, 0},
	{0xf0, 0xff, 0xff, 0xff, 0, 0},
	{0xfa, 0xff, 0xff, 0xff, 0, 0},
}

// maxPclntabCandidates bounds the magic matches validated per segment.
const maxPclntabCandidates = 1 << 12

// scanPclntab searches the data segments for a pclntab header that
// validates in full, and returns the bytes from there to the segment's end
// and their virtual address.
func scanPclntab(ef *elf.File, segs []dataSeg) ([]byte, uint64) {
	for _, s := range segs {
		for _, magic := range pclntabMagics {
			tries := 0
			for off := 0; off+8 <= len(s.data) && tries < maxPclntabCandidates; tries++ {
				i := bytes.Index(s.data[off:], magic)
				if i < 0 {
					break
				}
				at := off + i
				off = at + 1
				if validPclntab(s.data[at:], ef) {
					return s.data[at:], s.vaddr + uint64(at)
				}
			}
		}
	}
	return nil, 0
}

// validPclntab checks a candidate pclntab header found by scanning: the
// quantum and pointer size, the sub-table offsets in their order and
// inside the data, and a function table that is sorted, points inside
// the table and spans no more than the executable code.
func validPclntab(h []byte, ef *elf.File) bool {
	if len(h) < 16 || h[4] != 0 || h[5] != 0 || (h[6] != 1 && h[6] != 2 && h[6] != 4) || (h[7] != 4 && h[7] != 8) {
		return false
	}
	order := ef.ByteOrder
	ptr := int(h[7])
	magic := order.Uint32(h)
	nwords := 7 // Go 1.16: nfunc, nfiles, funcname, cu, filetab, pctab, pcln
	if magic == 0xfffffff0 || magic == 0xfffffff1 {
		nwords = 8 // Go 1.18+: textStart after nfiles
	} else if magic != 0xfffffffa {
		return false
	}
	hdr := 8 + nwords*ptr
	if len(h) < hdr {
		return false
	}
	word := func(b []byte) uint64 {
		if ptr == 8 {
			return order.Uint64(b)
		}
		return uint64(order.Uint32(b))
	}
	n := uint64(len(h))
	nfunc, nfiles := word(h[8:]), word(h[8+ptr:])
	if nfunc == 0 || nfunc > n/8 || nfiles == 0 || nfiles > n/4 {
		return false
	}
	offs := make([]uint64, 5)
	for i := range offs {
		offs[i] = word(h[8+(nwords-5+i)*ptr:])
	}
	prev := uint64(hdr)
	for _, o := range offs {
		if o < prev || o >= n {
			return false
		}
		prev = o
	}
	ftab := h[offs[4]:]
	span := execSpan(ef)
	if nwords == 8 {
		// functab: nfunc+1 (entry offset from text, _func offset) pairs
		// of uint32, the last entry's offset being etext-text.
		if uint64(len(ftab))/8 < nfunc+1 {
			return false
		}
		var last uint32
		for i := uint64(0); i <= nfunc; i++ {
			e, fo := order.Uint32(ftab[i*8:]), order.Uint32(ftab[i*8+4:])
			if e < last || (i < nfunc && (uint64(fo) < (nfunc+1)*8 || uint64(fo) >= uint64(len(ftab)))) {
				return false
			}
			last = e
		}
		return uint64(last) <= span
	}
	// Go 1.16: (entry pc, _func offset) pairs of words, pcs in the code.
	es := uint64(2 * ptr)
	if uint64(len(ftab))/es < nfunc+1 {
		return false
	}
	first := word(ftab)
	var last uint64
	for i := uint64(0); i <= nfunc; i++ {
		e, fo := word(ftab[i*es:]), word(ftab[i*es+uint64(ptr):])
		if e < last || (i < nfunc && (fo < (nfunc+1)*es || fo >= uint64(len(ftab)))) {
			return false
		}
		last = e
	}
	return inExec(ef, first) && last-first <= span
}

// execSpan is the size of the largest executable segment: no function
// table spans more.
func execSpan(ef *elf.File) uint64 {
	var m uint64
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Memsz > m {
			m = p.Memsz
		}
	}
	return m
}

// moduledata holds what the runtime's module data (runtime.firstmoduledata
// in a binary of one module) says about the binary's layout. Addresses are
// file virtual addresses.
type moduledata struct {
	addr                  uint64 // of the moduledata itself
	text, etext           uint64
	noptrdata, enoptrdata uint64
	data, edata           uint64
	bss, ebss             uint64
	noptrbss, enoptrbss   uint64
	gofunc                uint64 // Go 1.20+; 0 otherwise
}

// Word indices of moduledata fields (Go 1.18+): the pcHeader pointer, six
// slices, findfunctab, minpc, maxpc, then text at 22. gofunc is at 38 in
// Go 1.18 and 1.19, at 40 in Go 1.20 to 1.26 (covctrs and ecovctrs came
// in before end), at 43 from Go 1.27 (typedesclen, itaboffset, itabsize);
// since Go 1.20 epclntab, the end of the pclntab, follows it.
const (
	mdMinPC = 20
	mdText  = 22
)

// gofuncIndex says where moduledata.gofunc may be for a pclntab magic:
// the candidate word indices, and whether epclntab must follow to confirm
// one.
func gofuncIndex(magic uint32) (idx []int, confirm bool) {
	switch magic {
	case 0xfffffff1:
		return []int{40, 43}, true
	case 0xfffffff0:
		return []int{38}, false
	}
	return nil, false
}

// fill reads the fields through word (the i-th word of the moduledata);
// it reports whether they describe a plausible module of ef. The pclntab
// lies at pcln and ends by pclnEnd; magic is its header's.
func (md *moduledata) fill(ef *elf.File, magic uint32, pcln, pclnEnd uint64, word func(i int) (uint64, bool)) bool {
	get := func(i int) uint64 { v, _ := word(i); return v }
	minpc, maxpc := get(mdMinPC), get(mdMinPC+1)
	md.text, md.etext = get(mdText), get(mdText+1)
	if md.text == 0 || md.text > minpc || minpc > maxpc || md.etext < maxpc || !inExec(ef, md.text) {
		return false
	}
	md.noptrdata, md.enoptrdata = get(mdText+2), get(mdText+3)
	md.data, md.edata = get(mdText+4), get(mdText+5)
	md.bss, md.ebss = get(mdText+6), get(mdText+7)
	md.noptrbss, md.enoptrbss = get(mdText+8), get(mdText+9)
	idx, confirm := gofuncIndex(magic)
	for _, i := range idx {
		gofunc, ep := get(i), get(i+1)
		if gofunc == 0 || get(i-1) > gofunc || confirm && (ep <= pcln || ep > pclnEnd) {
			continue
		}
		md.gofunc = gofunc
		break
	}
	return true
}

// moduledataAt finds runtime.firstmoduledata by its first word, the
// pclntab's address pcln, in the writable data segments.
func moduledataAt(f *openFile, segs []dataSeg, magic uint32, pcln, pclnEnd uint64, ptrSize int) (moduledata, bool) {
	if pcln == 0 || (ptrSize != 4 && ptrSize != 8) {
		return moduledata{}, false
	}
	order := f.ef.ByteOrder
	pat := make([]byte, ptrSize)
	if ptrSize == 8 {
		order.PutUint64(pat, pcln)
	} else {
		order.PutUint32(pat, uint32(pcln))
	}
	for _, s := range segs {
		if !s.writable {
			continue
		}
		seg := s.data
		for off := 0; off < len(seg); {
			i := bytes.Index(seg[off:], pat)
			if i < 0 {
				break
			}
			at := off + i
			off = at + 1
			if at%ptrSize != 0 || at+mdMinPC*ptrSize+2*ptrSize > len(seg) {
				continue
			}
			md := moduledata{addr: s.vaddr + uint64(at)}
			word := func(i int) (uint64, bool) {
				p := at + i*ptrSize
				if p+ptrSize > len(seg) {
					return 0, false
				}
				if ptrSize == 8 {
					return order.Uint64(seg[p:]), true
				}
				return uint64(order.Uint32(seg[p:])), true
			}
			if md.fill(f.ef, magic, pcln, pclnEnd, word) {
				return md, true
			}
		}
	}
	return moduledata{}, false
}

// maxRelas bounds the dynamic relocations read.
const maxRelas = 1 << 22

// moduledataRela does what moduledataAt does for a PIE, whose moduledata
// pointers are R_*_RELATIVE relocations: the relocation whose addend is
// the pclntab's address is at &moduledata.pcHeader, and the others at the
// moduledata's words hold its fields.
func moduledataRela(f *openFile, magic uint32, pcln, pclnEnd uint64, ptrSize int) (moduledata, bool) {
	if pcln == 0 || ptrSize != 8 || f.ef.Class != elf.ELFCLASS64 {
		return moduledata{}, false
	}
	b := relaDyn(f)
	if b == nil {
		return moduledata{}, false
	}
	order := f.ef.ByteOrder
	addends := make(map[uint64]uint64, len(b)/24)
	var cands []uint64
	for i := 0; i+24 <= len(b); i += 24 {
		off, add := order.Uint64(b[i:]), order.Uint64(b[i+16:])
		addends[off] = add
		if add == pcln {
			cands = append(cands, off)
		}
	}
	for _, at := range cands {
		md := moduledata{addr: at}
		word := func(i int) (uint64, bool) {
			v, ok := addends[at+uint64(i*ptrSize)]
			return v, ok
		}
		if md.fill(f.ef, magic, pcln, pclnEnd, word) {
			return md, true
		}
	}
	return moduledata{}, false
}

// relaDyn returns the dynamic RELA relocations: .rela.dyn, else (section
// headers stripped) the table DT_RELA and DT_RELASZ point at.
func relaDyn(f *openFile) []byte {
	if s := f.ef.Section(".rela.dyn"); s != nil {
		if s.Type != elf.SHT_RELA || s.Size/24 > maxRelas {
			return nil
		}
		b, err := sectionData(s, f.size)
		if err != nil {
			return nil
		}
		return b
	}
	var dyn *elf.Prog
	for _, p := range f.ef.Progs {
		if p.Type == elf.PT_DYNAMIC {
			dyn = p
		}
	}
	if dyn == nil || dyn.Filesz > 1<<20 || dyn.Off > uint64(f.size) || dyn.Filesz > uint64(f.size)-dyn.Off {
		return nil
	}
	d := make([]byte, dyn.Filesz)
	if _, err := f.r.ReadAt(d, int64(dyn.Off)); err != nil {
		return nil
	}
	var rela, relasz uint64
	for i := 0; i+16 <= len(d); i += 16 {
		switch elf.DynTag(f.ef.ByteOrder.Uint64(d[i:])) {
		case elf.DT_RELA:
			rela = f.ef.ByteOrder.Uint64(d[i+8:])
		case elf.DT_RELASZ:
			relasz = f.ef.ByteOrder.Uint64(d[i+8:])
		}
	}
	if rela == 0 || relasz == 0 || relasz/24 > maxRelas {
		return nil
	}
	off, ok := vaddrToOffset(elfLoads(f.ef), rela, relasz)
	if !ok || off > uint64(f.size) || relasz > uint64(f.size)-off {
		return nil
	}
	b := make([]byte, relasz)
	if _, err := f.r.ReadAt(b, int64(off)); err != nil {
		return nil
	}
	return b
}

// vaddrToOffset maps [vaddr, vaddr+n) to a file offset, through the
// PT_LOAD segment whose file bytes hold it all.
func vaddrToOffset(loads []loadSeg, vaddr, n uint64) (uint64, bool) {
	for _, l := range loads {
		if vaddr >= l.vaddr && vaddr-l.vaddr <= l.filesz && l.filesz-(vaddr-l.vaddr) >= n {
			return l.off + (vaddr - l.vaddr), true
		}
	}
	return 0, false
}

// goBuildInfoMagic starts the Go build info blob every Go binary carries.
var goBuildInfoMagic = []byte("\xff Go buildinf:")

// maxGoVersion bounds the Go version string read from the build info.
const maxGoVersion = 64

// goVersion reads the Go version ("go1.19.8") from the build info:
// the .go.buildinfo section, else the blob found in the data segments.
// Go 1.18+ keep the strings inline; older ones point at them.
func goVersion(f *openFile, segs func() []dataSeg) string {
	var blob []byte
	if s := f.ef.Section(".go.buildinfo"); s != nil && s.Type != elf.SHT_NOBITS && s.Size < 1<<20 {
		blob, _ = sectionData(s, f.size)
	}
	if !bytes.HasPrefix(blob, goBuildInfoMagic) {
		blob = nil
		for _, s := range segs() {
			for off := 0; off < len(s.data); {
				i := bytes.Index(s.data[off:], goBuildInfoMagic)
				if i < 0 {
					break
				}
				if (off+i)%16 == 0 {
					blob = s.data[off+i:]
					break
				}
				off += i + 1
			}
			if blob != nil {
				break
			}
		}
	}
	return parseGoBuildInfo(blob, f.ef.ByteOrder, func(addr, n uint64) []byte {
		off, ok := vaddrToOffset(elfLoads(f.ef), addr, n)
		if !ok || n > maxGoVersion || off > uint64(f.size) || n > uint64(f.size)-off {
			return nil
		}
		b := make([]byte, n)
		if _, err := f.r.ReadAt(b, int64(off)); err != nil {
			return nil
		}
		return b
	})
}

// parseGoBuildInfo returns the Go version in a build info blob, reading
// through read (file virtual address, length) for the pointer format of
// Go 1.17 and older; "" if none or not plausible.
func parseGoBuildInfo(b []byte, order binary.ByteOrder, read func(addr, n uint64) []byte) string {
	if len(b) < 32 || !bytes.HasPrefix(b, goBuildInfoMagic) {
		return ""
	}
	ptr, flags := int(b[14]), b[15]
	var v []byte
	if flags&2 != 0 {
		n, k := binary.Uvarint(b[32:])
		if k <= 0 || n > maxGoVersion || uint64(len(b)-32-k) < n {
			return ""
		}
		v = b[32+k : 32+k+int(n)]
	} else {
		if ptr != 4 && ptr != 8 {
			return ""
		}
		word := func(p []byte) uint64 {
			if ptr == 8 {
				return order.Uint64(p)
			}
			return uint64(order.Uint32(p))
		}
		if flags&1 != 0 {
			order = binary.BigEndian
		}
		hdr := read(word(b[16:]), uint64(2*ptr))
		if len(hdr) != 2*ptr {
			return ""
		}
		v = read(word(hdr), word(hdr[ptr:]))
	}
	if !bytes.HasPrefix(v, []byte("go")) && !bytes.HasPrefix(v, []byte("devel")) || !utf8.Valid(v) {
		return ""
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return ""
		}
	}
	return string(v)
}
