package capfile

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"stackshot/procmaps"
	"stackshot/ptrace"
)

// Segment is a range of the target's memory saved in a core.
type Segment struct {
	Addr uint64
	Data []byte
}

// CoreMemory selects the memory a core carries besides the stack windows,
// the vdso, the first page of each ELF mapping and the dynamic linker's
// list of libraries.
type CoreMemory int

const (
	CoreStacks   CoreMemory = iota // nothing more: small, and no heap secrets
	CoreWritable                   // every writable mapping
	CoreAll                        // every readable mapping
)

// ParseCoreMemory parses --core-memory.
func ParseCoreMemory(s string) (CoreMemory, error) {
	switch s {
	case "stacks", "":
		return CoreStacks, nil
	case "writable":
		return CoreWritable, nil
	case "all":
		return CoreAll, nil
	}
	return 0, fmt.Errorf("--core-memory %q: want stacks, writable or all", s)
}

// MaxCoreMemory bounds the memory CollectMemory copies for --core-memory
// writable or all; mappings past it are left out (and said so).
const MaxCoreMemory = 1 << 30

const pageSize = 4096

// Limits on walking the dynamic linker's structures in target memory.
const (
	maxPhdrs     = 256
	maxDynamic   = 4096 // entries
	maxLinkMaps  = 4096
	maxNameBytes = 4096
)

// CollectMemory reads from the live target's memory (after the capture,
// with every thread running) what a core needs besides the captured stacks:
// the first page of each ELF mapping (its headers and build-id note, which
// gdb and eu-stack identify modules by), the pages the dynamic linker's
// r_debug list of libraries lives in (found through the executable's
// DT_DEBUG, so gdb finds the shared libraries), and, as asked, every
// writable or readable mapping. It returns what it could read and a note
// on what it left out ("" when nothing).
func CollectMemory(p *ptrace.Process, mem io.ReaderAt, what CoreMemory) ([]Segment, string) {
	var segs []Segment
	pages := map[uint64]bool{}
	ms := procmaps.Maps(p.Maps)
	for i := range ms {
		m := &ms[i]
		if (m.Kind == procmaps.KindFile || m.Kind == procmaps.KindMemfd) && m.Offset == 0 && m.Readable() {
			pages[m.Start] = true
		}
	}
	for _, a := range linkMapPages(p.Auxv, mem) {
		pages[a] = true
	}
	addrs := make([]uint64, 0, len(pages))
	for a := range pages {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for _, a := range addrs {
		if m, ok := ms.Find(a); !ok || !m.Readable() || m.Kind == procmaps.KindVVar {
			continue
		}
		buf := make([]byte, pageSize)
		if n, _ := mem.ReadAt(buf, int64(a)); n == pageSize {
			segs = append(segs, Segment{Addr: a, Data: buf})
		}
	}
	if what == CoreStacks {
		return segs, ""
	}
	var total uint64
	left := 0
	for i := range ms {
		m := &ms[i]
		if !m.Readable() || m.Kind == procmaps.KindVVar || m.Kind == procmaps.KindVsyscall || m.Kind == procmaps.KindVDSO {
			continue
		}
		if what == CoreWritable && !m.Writable() {
			continue
		}
		size := m.End - m.Start
		if total+size > MaxCoreMemory {
			left++
			continue
		}
		total += size
		segs = append(segs, readMapping(mem, m.Start, size)...)
	}
	if left > 0 {
		return segs, fmt.Sprintf("%d mappings left out of the core (more than %d MiB of memory)", left, MaxCoreMemory>>20)
	}
	return segs, ""
}

// readMapping copies a mapping, page run by page run: pages that cannot be
// read (guard pages, I/O mappings) end one segment and start the next.
func readMapping(mem io.ReaderAt, start, size uint64) []Segment {
	var out []Segment
	const chunk = 1 << 20
	var cur *Segment
	for off := uint64(0); off < size; {
		n := min(uint64(chunk), size-off)
		buf := make([]byte, n)
		got, _ := mem.ReadAt(buf, int64(start+off))
		got -= got % pageSize
		if got > 0 {
			if cur != nil && cur.Addr+uint64(len(cur.Data)) == start+off {
				cur.Data = append(cur.Data, buf[:got]...)
			} else {
				out = append(out, Segment{Addr: start + off, Data: buf[:got]})
				cur = &out[len(out)-1]
			}
		}
		if uint64(got) < n {
			cur = nil
			off += uint64(got) + pageSize // skip the page that failed
			continue
		}
		off += n
	}
	return out
}

// Auxiliary vector and dynamic section tags used here.
const (
	atNull   = 0
	atPhdr   = 3
	atPhnum  = 5
	ptDyn    = 2
	ptPhdr   = 6
	dtNull   = 0
	dtDebug  = 21
	phdrSize = 56
)

// linkMapPages finds the pages gdb reads to list shared libraries: the
// executable's dynamic section, r_debug, each link_map, its name and its
// l_ld. Everything is read from target memory and bounded.
func linkMapPages(auxv []byte, mem io.ReaderAt) []uint64 {
	dyn, dynSize, ok := execDynamic(auxv, mem)
	if !ok {
		return nil // a static executable: no dynamic linker list
	}
	var pages []uint64
	addRange := func(addr, size uint64) {
		if size == 0 {
			return
		}
		for a := addr &^ (pageSize - 1); a < addr+size && a >= addr&^(pageSize-1); a += pageSize {
			pages = append(pages, a)
		}
	}
	addRange(dyn, dynSize)
	d := make([]byte, dynSize)
	if n, _ := mem.ReadAt(d, int64(dyn)); n != len(d) {
		return pages
	}
	var rdebug uint64
	for i := 0; i+16 <= len(d); i += 16 {
		tag := binary.LittleEndian.Uint64(d[i:])
		if tag == dtNull {
			break
		}
		if tag == dtDebug {
			rdebug = binary.LittleEndian.Uint64(d[i+8:])
		}
	}
	if rdebug == 0 {
		return pages
	}
	// struct r_debug { int r_version; link_map *r_map; ElfW(Addr) r_brk; r_state; r_ldbase; }
	addRange(rdebug, 40)
	var w [8]byte
	if n, _ := mem.ReadAt(w[:], int64(rdebug+8)); n != 8 {
		return pages
	}
	walkLinkMap(mem, binary.LittleEndian.Uint64(w[:]), addRange)
	return pages
}

// execDynamic finds the executable's dynamic section in memory, through
// the auxiliary vector's AT_PHDR and its PT_PHDR (the load bias).
func execDynamic(auxv []byte, mem io.ReaderAt) (addr, size uint64, ok bool) {
	var phdr, phnum uint64
	for i := 0; i+16 <= len(auxv); i += 16 {
		tag, val := binary.LittleEndian.Uint64(auxv[i:]), binary.LittleEndian.Uint64(auxv[i+8:])
		if tag == atNull {
			break
		}
		switch tag {
		case atPhdr:
			phdr = val
		case atPhnum:
			phnum = val
		}
	}
	if phdr == 0 || phnum == 0 || phnum > maxPhdrs {
		return 0, 0, false
	}
	ph := make([]byte, phnum*phdrSize)
	if n, _ := mem.ReadAt(ph, int64(phdr)); n != len(ph) {
		return 0, 0, false
	}
	var bias, dynVaddr, dynSize uint64
	haveBias := false
	for i := uint64(0); i < phnum; i++ {
		e := ph[i*phdrSize:]
		typ := binary.LittleEndian.Uint32(e)
		vaddr, memsz := binary.LittleEndian.Uint64(e[16:]), binary.LittleEndian.Uint64(e[40:])
		switch typ {
		case ptPhdr:
			bias, haveBias = phdr-vaddr, true
		case ptDyn:
			dynVaddr, dynSize = vaddr, memsz
		}
	}
	if !haveBias || dynVaddr == 0 {
		return 0, 0, false
	}
	return dynVaddr + bias, min(dynSize, maxDynamic*16), true
}

// walkLinkMap follows the dynamic linker's list from lm, bounded and
// loop-checked, and adds each node, its name and its l_ld to the pages.
func walkLinkMap(mem io.ReaderAt, lm uint64, addRange func(addr, size uint64)) {
	seen := map[uint64]bool{}
	// struct link_map { l_addr, l_name, l_ld, l_next, l_prev; ... }
	var node [40]byte
	name := make([]byte, maxNameBytes)
	for i := 0; lm != 0 && i < maxLinkMaps && !seen[lm]; i++ {
		seen[lm] = true
		if n, _ := mem.ReadAt(node[:], int64(lm)); n != len(node) {
			return
		}
		addRange(lm, 40)
		lname := binary.LittleEndian.Uint64(node[8:])
		lld := binary.LittleEndian.Uint64(node[16:])
		if lname != 0 {
			n, _ := mem.ReadAt(name[:pageSize-lname%pageSize], int64(lname))
			end := uint64(n)
			for j := 0; j < n; j++ {
				if name[j] == 0 {
					end = uint64(j) + 1
					break
				}
			}
			addRange(lname, max(end, 1))
			if end == uint64(n) && n > 0 { // runs into the next page
				addRange(lname+uint64(n), 1)
			}
		}
		if lld != 0 {
			addRange(lld, 16)
		}
		lm = binary.LittleEndian.Uint64(node[24:])
	}
}
