package symtab

import (
	"debug/elf"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
)

// symTable is a sorted array of function symbols. Names are demangled on
// first use.
type symTable struct {
	addr  []uint64
	end   []uint64 // exclusive; from st_size, else the next symbol / section end
	name  []string // raw
	dem   []atomic.Pointer[string]
	count int
}

// rawSym is a symbol being collected.
type rawSym struct {
	addr, size uint64
	secEnd     uint64 // end of the containing section (bound for size 0)
	name       string
	rank       int // lower is better: source order, then binding
}

// symSource ranks, best first.
const (
	rankDebugSymtab = iota * 4
	rankSymtab
	rankMiniDebug
	rankDynsym
)

// collectSyms appends the function symbols of one table of f.
func collectSyms(f *openFile, dynamic bool, baseRank int, out []rawSym) ([]rawSym, error) {
	ef := f.ef
	cost, err := symtabCost(f, dynamic)
	if err != nil {
		return out, err
	}
	if f.sym != nil {
		// debug/elf reads the table and its strings whole and builds a
		// Symbol per entry: charged before, given back after.
		if err := f.sym.budget.Take(cost); err != nil {
			f.sym.noteLimit(err)
			return out, err
		}
		defer f.sym.budget.Give(cost)
	}
	var syms []elf.Symbol
	err = safely("symbols", func() error {
		var err error
		if dynamic {
			syms, err = ef.DynamicSymbols()
		} else {
			syms, err = ef.Symbols()
		}
		return err
	})
	if err != nil {
		return out, err
	}
	if len(syms) > maxSymbols {
		syms = syms[:maxSymbols]
	}
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if s.Name == "" || s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE {
			continue
		}
		if int(s.Section) >= len(ef.Sections) {
			continue
		}
		sec := ef.Sections[s.Section]
		switch typ {
		case elf.STT_FUNC, elf.STT_GNU_IFUNC:
		case elf.STT_NOTYPE:
			// Assembly labels: only in executable sections, and not
			// local labels or mapping symbols.
			if sec.Flags&elf.SHF_EXECINSTR == 0 || s.Name[0] == '$' || (len(s.Name) > 1 && s.Name[:2] == ".L") {
				continue
			}
		default:
			continue
		}
		if sec.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		rank := baseRank
		name := s.Name
		if !dynamic {
			// A versioned definition ("fdopen@@GLIBC_2.2.5") in .symtab:
			// show the plain name, prefer an unversioned alias.
			if i := strings.IndexByte(name, '@'); i > 0 {
				name = name[:i]
				rank += 2
			}
		}
		switch elf.ST_BIND(s.Info) {
		case elf.STB_GLOBAL:
		case elf.STB_WEAK:
			rank++
		default:
			rank += 2
		}
		if typ == elf.STT_NOTYPE {
			rank += 3
		}
		// Go's assembly functions carry their ABI in ELF symbol names
		// ("runtime.goexit.abi0"); Go's own tools and the pclntab say
		// "runtime.goexit".
		name = strings.TrimSuffix(name, ".abi0")
		// glibc's internal aliases ("__GI___libc_read",
		// "__libc_start_main_alias_2") name the same code worse than the
		// public symbol beside them.
		if strings.HasPrefix(name, "__GI_") || strings.HasPrefix(name, "__EI_") || strings.Contains(name, "_alias_") {
			rank++
		}
		secEnd := sec.Addr + sec.Size
		if secEnd < sec.Addr {
			secEnd = ^uint64(0)
		}
		out = append(out, rawSym{addr: s.Value, size: s.Size, secEnd: secEnd, name: name, rank: rank})
	}
	return out, nil
}

// buildSymTable sorts and deduplicates raw symbols: one per address, the
// best ranked name, the largest size any alias gives.
func buildSymTable(raw []rawSym) *symTable {
	if len(raw) == 0 {
		return nil
	}
	// Stable: of equally ranked aliases the first in table order wins.
	sort.SliceStable(raw, func(i, j int) bool {
		if raw[i].addr != raw[j].addr {
			return raw[i].addr < raw[j].addr
		}
		return raw[i].rank < raw[j].rank
	})
	t := &symTable{}
	var secEnds []uint64
	var sizes []uint64
	for i := 0; i < len(raw); {
		j := i
		size := uint64(0)
		secEnd := raw[i].secEnd
		for ; j < len(raw) && raw[j].addr == raw[i].addr; j++ {
			if raw[j].size > size {
				size = raw[j].size
			}
		}
		t.addr = append(t.addr, raw[i].addr)
		t.name = append(t.name, raw[i].name)
		sizes = append(sizes, size)
		secEnds = append(secEnds, secEnd)
		i = j
	}
	n := len(t.addr)
	t.end = make([]uint64, n)
	for i := range n {
		if sizes[i] > 0 {
			t.end[i] = t.addr[i] + sizes[i]
			if t.end[i] < t.addr[i] {
				t.end[i] = ^uint64(0)
			}
			continue
		}
		// No size (assembly): up to the next symbol, within the section.
		e := secEnds[i]
		if i+1 < n && t.addr[i+1] < e {
			e = t.addr[i+1]
		}
		if e <= t.addr[i] {
			e = t.addr[i] + 1
		}
		t.end[i] = e
	}
	t.dem = make([]atomic.Pointer[string], n)
	t.count = n
	return t
}

// lookup finds the symbol containing pc.
func (t *symTable) lookup(pc uint64) (int, bool) {
	if t == nil {
		return 0, false
	}
	i, _ := slices.BinarySearch(t.addr, pc+1)
	i-- // last symbol with addr <= pc
	// A symbol's size may cover a later, smaller one (nested labels):
	// look back a few entries for one that contains pc.
	for k := 0; i >= 0 && k < 8; i, k = i-1, k+1 {
		if pc < t.end[i] {
			return i, true
		}
	}
	return 0, false
}

// nameAt returns the (demangled on first use) name of symbol i.
func (t *symTable) nameAt(i int, demangle bool) string {
	if !demangle {
		return t.name[i]
	}
	if p := t.dem[i].Load(); p != nil {
		return *p
	}
	d := Demangle(t.name[i])
	t.dem[i].Store(&d)
	return d
}

// symtabCost is the memory debug/elf spends on reading a symbol table of f
// (.symtab, or .dynsym when dynamic): the section, its string table, and a
// Symbol value per entry. Compressed tables are refused: debug/elf would
// decompress them to any size their header claims (no linker writes them).
func symtabCost(f *openFile, dynamic bool) (int64, error) {
	typ := elf.SHT_SYMTAB
	if dynamic {
		typ = elf.SHT_DYNSYM
	}
	ef := f.ef
	for _, s := range ef.Sections {
		if s.Type != typ {
			continue
		}
		if s.Flags&elf.SHF_COMPRESSED != 0 {
			return 0, &FormatError{Section: s.Name, Offset: s.Offset, Msg: "compressed symbol table"}
		}
		cost := int64(s.Size)
		if s.Entsize > 0 {
			cost += int64(s.Size/s.Entsize) * 96
		}
		if s.Link > 0 && int(s.Link) < len(ef.Sections) {
			str := ef.Sections[s.Link]
			if str.Flags&elf.SHF_COMPRESSED != 0 {
				return 0, &FormatError{Section: str.Name, Offset: str.Offset, Msg: "compressed string table"}
			}
			cost += int64(str.Size)
		}
		if cost < 0 || (f.size > 0 && cost > 8*f.size+1<<20) {
			return 0, &FormatError{Section: s.Name, Offset: s.Offset, Msg: "symbol table larger than its file"}
		}
		return cost, nil
	}
	return 0, nil
}
