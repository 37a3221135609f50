package resolve

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"stackshot/internal/arch"
	"stackshot/internal/safeelf"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/symtab"
)

// Bounds of the dynamic linker's lists read from a core's memory.
const (
	maxDynEntries = 1024
	maxLinkMaps   = 4096
	maxLinkName   = 4096
)

// Auxiliary vector tags and dynamic tags read here.
const (
	atPHDR    = 3
	atExecFn  = 31
	dtNull    = 0
	dtDebug   = 21
	pageBytes = 4096
)

// LinkMapModules finds the modules of a core that names none (no NT_FILE:
// qemu's cores), as a debugger does: the main executable exe (else the
// path the auxiliary vector's AT_EXECFN gives), its dynamic section in
// the core's memory, DT_DEBUG's r_debug, and the dynamic linker's
// link_map list of every loaded object with its load address. Each file
// is opened as the symbolizer opens modules (under root first) and its
// PT_LOADs become the mappings, with the core's anonymous memory kept
// where no file lies. Nothing is done when the core names files already
// or when the executable cannot be opened; what was found is kept.
func LinkMapModules(p *ptrace.Process, mem io.ReaderAt, sym *symtab.Symbolizer, root, exe string) {
	for i := range p.Maps {
		if p.Maps[i].Kind == procmaps.KindFile {
			return
		}
	}
	phdr := auxv(p.Auxv, atPHDR)
	if exe == "" {
		exe = cstringAt(mem, auxv(p.Auxv, atExecFn))
	}
	if exe == "" {
		return
	}
	var files []procmaps.Mapping
	ef, dyn, bias, ok := openModule(sym, root, exe, phdr)
	if !ok {
		return
	}
	want := elf.EM_X86_64
	if p.Arch == arch.ARM64 {
		want = elf.EM_AARCH64
	}
	if ef.Machine != want {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s is a file for %v, the core is of %s: not used", exe, ef.Machine, p.Arch))
		return
	}
	files = append(files, loads(ef, bias, exe)...)
	p.Exe = exe
	if dyn == 0 { // a static executable (Go's): no other object
		p.Maps = joinMaps(files, p.Maps)
		return
	}
	for _, lm := range linkMaps(mem, bias+dyn) {
		if lm.name == "" || lm.name == exe {
			continue
		}
		f, err := sym.OpenModule(root, lm.name)
		if err != nil {
			continue
		}
		if sf, err := openELF(f); err == nil && sf.Machine == want {
			files = append(files, loads(sf, lm.addr, lm.name)...)
		} else if err == nil {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s is a file for %v, the core is of %s: not used (give --sysroot)", lm.name, sf.Machine, p.Arch))
		}
		f.Close()
	}
	p.Maps = joinMaps(files, p.Maps)
}

// openModule opens the main executable and returns its PT_DYNAMIC's
// virtual address (0: a static executable) and its load bias, from where
// the auxiliary vector says its program headers are (a fixed-address
// executable's is 0 when the core has no auxiliary vector).
func openModule(sym *symtab.Symbolizer, root, exe string, phdr uint64) (*elf.File, uint64, uint64, bool) {
	f, err := sym.OpenModule(root, exe)
	if err != nil {
		return nil, 0, 0, false
	}
	defer f.Close()
	ef, err := openELF(f)
	if err != nil {
		return nil, 0, 0, false
	}
	var dyn, phVaddr uint64
	havePh := false
	for _, pr := range ef.Progs {
		switch {
		case pr.Type == elf.PT_DYNAMIC:
			dyn = pr.Vaddr
		case pr.Type == elf.PT_PHDR:
			phVaddr, havePh = pr.Vaddr, true
		case pr.Type == elf.PT_LOAD && pr.Off == 0 && !havePh:
			// (no PT_PHDR: the headers lie in the segment that maps
			// the file's start)
			phVaddr = pr.Vaddr + elfPhoff(ef)
		}
	}
	if phdr == 0 && ef.Type == elf.ET_EXEC {
		return ef, dyn, 0, true
	}
	if phdr == 0 || phdr < phVaddr {
		return nil, 0, 0, false
	}
	return ef, dyn, phdr - phVaddr, true
}

// elfPhoff is the file offset of f's program headers.
func elfPhoff(f *elf.File) uint64 {
	if f.Class == elf.ELFCLASS64 {
		return 64
	}
	return 52
}

// openELF parses a module's headers, bounded as every module is.
func openELF(f io.ReaderAt) (*elf.File, error) {
	size, err := safeelf.Size(f)
	if err != nil {
		return nil, err
	}
	sf, err := safeelf.Open(f, size, nil)
	if err != nil {
		return nil, err
	}
	sf.Release() // (only the program headers are used, already parsed)
	return sf.File, nil
}

// loads turns a module's PT_LOADs at bias into mappings of path.
func loads(f *elf.File, bias uint64, path string) []procmaps.Mapping {
	var out []procmaps.Mapping
	for _, pr := range f.Progs {
		if pr.Type != elf.PT_LOAD || pr.Memsz == 0 {
			continue
		}
		start := (bias + pr.Vaddr) &^ (pageBytes - 1)
		end := (bias + pr.Vaddr + pr.Memsz + pageBytes - 1) &^ (pageBytes - 1)
		if end <= start {
			continue
		}
		perms := []byte("---p")
		if pr.Flags&elf.PF_R != 0 {
			perms[0] = 'r'
		}
		if pr.Flags&elf.PF_W != 0 {
			perms[1] = 'w'
		}
		if pr.Flags&elf.PF_X != 0 {
			perms[2] = 'x'
		}
		out = append(out, procmaps.Mapping{Start: start, End: end, Offset: pr.Off &^ (pageBytes - 1),
			Perms: string(perms), Path: path, Kind: procmaps.KindFile})
	}
	return out
}

type linkMap struct {
	addr uint64
	name string
}

// linkMaps reads the dynamic section at dyn for DT_DEBUG, then r_debug's
// list of loaded objects (struct link_map: l_addr, l_name, l_ld, l_next).
func linkMaps(mem io.ReaderAt, dyn uint64) []linkMap {
	var rdebug uint64
	for i := uint64(0); i < maxDynEntries; i++ {
		tag, ok1 := word(mem, dyn+16*i)
		val, ok2 := word(mem, dyn+16*i+8)
		if !ok1 || !ok2 || tag == dtNull {
			break
		}
		if tag == dtDebug {
			rdebug = val
		}
	}
	if rdebug == 0 {
		return nil
	}
	lm, _ := word(mem, rdebug+8) // r_map
	var out []linkMap
	seen := map[uint64]bool{}
	for lm != 0 && !seen[lm] && len(out) < maxLinkMaps {
		seen[lm] = true
		addr, ok1 := word(mem, lm)
		name, ok2 := word(mem, lm+8)
		next, ok3 := word(mem, lm+24)
		if !ok1 || !ok2 || !ok3 {
			break
		}
		out = append(out, linkMap{addr: addr, name: cstringAt(mem, name)})
		lm = next
	}
	return out
}

func word(mem io.ReaderAt, addr uint64) (uint64, bool) {
	var b [8]byte
	if n, _ := mem.ReadAt(b[:], int64(addr)); n != 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}

// cstringAt reads a NUL-terminated string of at most maxLinkName bytes.
func cstringAt(mem io.ReaderAt, addr uint64) string {
	if addr == 0 || addr >= 1<<63 {
		return ""
	}
	var out []byte
	var b [256]byte
	for len(out) < maxLinkName {
		n, _ := mem.ReadAt(b[:], int64(addr)+int64(len(out)))
		if n == 0 {
			return ""
		}
		for _, c := range b[:n] {
			if c == 0 {
				return string(out)
			}
			out = append(out, c)
		}
	}
	return ""
}

func auxv(b []byte, tag uint64) uint64 {
	for i := 0; i+16 <= len(b); i += 16 {
		t := binary.LittleEndian.Uint64(b[i:])
		if t == 0 {
			break
		}
		if t == tag {
			return binary.LittleEndian.Uint64(b[i+8:])
		}
	}
	return 0
}

// joinMaps puts the files' mappings among the core's others, keeping
// those no file covers, in address order.
func joinMaps(files, others []procmaps.Mapping) []procmaps.Mapping {
	sort.Slice(files, func(a, b int) bool { return files[a].Start < files[b].Start })
	out := append([]procmaps.Mapping(nil), files...)
	for _, m := range others {
		i := sort.Search(len(files), func(i int) bool { return files[i].End > m.Start })
		if i < len(files) && files[i].Start < m.End {
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Start < out[b].Start })
	return out
}
