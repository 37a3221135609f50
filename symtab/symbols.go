package symtab

import (
	"cmp"
	"debug/elf"
	"slices"
	"strings"
	"sync"
)

// symTable is a sorted array of function symbols. Names are demangled on
// first use. Ends and names are views of the cache entry's bytes (the
// symbols' format, encodeSymbols), used where they lie: a warm run decodes
// only the addresses.
type symTable struct {
	addr     []uint64
	ends     []byte // count little-endian u64: each symbol's end (exclusive; from st_size, else the next symbol / section end)
	nameEnds []byte // count little-endian u32: where each raw name ends in names
	names    string
	count    int
	demMu    sync.Mutex
	dem      map[int]string // demangled names met so far
}

// end is symbol i's end (exclusive).
func (t *symTable) end(i int) uint64 { return le.Uint64(t.ends[8*i:]) }

// name is symbol i's raw name.
func (t *symTable) name(i int) string {
	start := uint32(0)
	if i > 0 {
		start = le.Uint32(t.nameEnds[4*(i-1):])
	}
	return t.names[start:le.Uint32(t.nameEnds[4*i:])]
}

// rawSym is a symbol being collected.
type rawSym struct {
	addr, size uint64
	secEnd     uint64 // end of the containing section (bound for size 0)
	name       string
	rank       int32 // lower is better: source order, then binding
}

// symSource ranks, best first.
const (
	rankDebugSymtab = iota * 4
	rankSymtab
	rankMiniDebug
	rankDynsym
)

// collectSyms appends the function symbols of one table of f. It reads the
// table itself rather than through debug/elf's Symbols, which builds a
// Symbol and a name string per entry: names here are substrings of one
// copy of the string table, so a symbol costs no allocation of its own.
func collectSyms(f *openFile, dynamic bool, baseRank int, out []rawSym) ([]rawSym, error) {
	return collectSymsOf(f, dynamic, false, baseRank, out)
}

// collectSymsOf is collectSyms of the function symbols, or (data) of the
// data objects (objects) with a size (STT_OBJECT: globals and statics).
func collectSymsOf(f *openFile, dynamic, objects bool, baseRank int, out []rawSym) ([]rawSym, error) {
	ef := f.ef
	if _, err := symtabCost(f, dynamic); err != nil {
		return out, err
	}
	typ := elf.SHT_SYMTAB
	if dynamic {
		typ = elf.SHT_DYNSYM
	}
	var symSec *elf.Section
	for _, s := range ef.Sections {
		if s.Type == typ {
			symSec = s
			break
		}
	}
	if symSec == nil {
		return out, ErrNoSymbols
	}
	if symSec.Link == 0 || int(symSec.Link) >= len(ef.Sections) {
		return out, &FormatError{Section: symSec.Name, Offset: symSec.Offset, Msg: "symbol table without a string table"}
	}
	// f.data charges the budget for what it reads; both are given back
	// once the symbols are collected (their names are kept in one string
	// copy, as debug/elf's strings were before).
	data, err := f.data(symSec)
	if err != nil {
		return out, err
	}
	if f.sym != nil {
		defer f.sym.budget.Give(int64(len(data)))
	}
	strData, err := f.data(ef.Sections[symSec.Link])
	if err != nil {
		return out, err
	}
	if f.sym != nil {
		defer f.sym.budget.Give(int64(len(strData)))
	}
	strs := string(strData)
	entSize := 24
	if ef.Class == elf.ELFCLASS32 {
		entSize = 16
	}
	n := len(data) / entSize
	if n > maxSymbols {
		n = maxSymbols
	}
	order := ef.ByteOrder
	out = slices.Grow(out, min(n, 1<<16))
	for k := 1; k < n; k++ { // entry 0 is the null symbol
		e := data[k*entSize : (k+1)*entSize]
		var nameOff uint32
		var info uint8
		var shndx uint16
		var value, size uint64
		if entSize == 24 {
			nameOff = order.Uint32(e[0:4])
			info = e[4]
			shndx = order.Uint16(e[6:8])
			value = order.Uint64(e[8:16])
			size = order.Uint64(e[16:24])
		} else {
			nameOff = order.Uint32(e[0:4])
			value = uint64(order.Uint32(e[4:8]))
			size = uint64(order.Uint32(e[8:12]))
			info = e[12]
			shndx = order.Uint16(e[14:16])
		}
		section := elf.SectionIndex(shndx)
		if section == elf.SHN_UNDEF || section >= elf.SHN_LORESERVE || int(section) >= len(ef.Sections) {
			continue
		}
		if int64(nameOff) >= int64(len(strs)) {
			continue
		}
		name := strs[nameOff:]
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if name == "" {
			continue
		}
		styp := elf.ST_TYPE(info)
		sec := ef.Sections[section]
		if !wantSym(styp, sec, name, size, objects) {
			continue
		}
		rank := int32(baseRank)
		if !dynamic {
			// A versioned definition ("fdopen@@GLIBC_2.2.5") in .symtab:
			// show the plain name, prefer an unversioned alias.
			if i := strings.IndexByte(name, '@'); i > 0 {
				name = name[:i]
				rank += 2
			}
		}
		switch elf.ST_BIND(info) {
		case elf.STB_GLOBAL:
		case elf.STB_WEAK:
			rank++
		default:
			rank += 2
		}
		if styp == elf.STT_NOTYPE {
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
		out = append(out, rawSym{addr: value, size: size, secEnd: secEnd, name: name, rank: rank})
	}
	return out, nil
}

// wantSym says whether a symbol of type styp in section sec is one
// collected: a function (or an assembly label in code), or with objects a
// data object with a size; either in memory at run time.
func wantSym(styp elf.SymType, sec *elf.Section, name string, size uint64, objects bool) bool {
	switch {
	case objects:
		if styp != elf.STT_OBJECT || size == 0 {
			return false
		}
	case styp == elf.STT_FUNC, styp == elf.STT_GNU_IFUNC:
	case styp == elf.STT_NOTYPE:
		// Assembly labels: only in executable sections, and not
		// local labels or mapping symbols.
		if sec.Flags&elf.SHF_EXECINSTR == 0 || name[0] == '$' || strings.HasPrefix(name, ".L") {
			return false
		}
	default:
		return false
	}
	return sec.Flags&elf.SHF_ALLOC != 0
}

// buildSymTable sorts and deduplicates raw symbols: one per address, the
// best ranked name, the largest size any alias gives.
func buildSymTable(raw []rawSym) *symTable {
	if len(raw) == 0 {
		return nil
	}
	order := sortByAddr(raw)
	distinct := 0
	for k, i := range order {
		if k == 0 || raw[i].addr != raw[order[k-1]].addr {
			distinct++
		}
	}
	addrs := make([]uint64, 0, distinct)
	names := make([]string, 0, distinct)
	secEnds := make([]uint64, 0, distinct)
	sizes := make([]uint64, 0, distinct)
	for k := 0; k < len(order); {
		// The aliases at one address, in collection order: the best
		// ranked names it (of equals, the first collected); the largest
		// size any of them gives is its size.
		addr := raw[order[k]].addr
		best := &raw[order[k]]
		size := uint64(0)
		for ; k < len(order) && raw[order[k]].addr == addr; k++ {
			r := &raw[order[k]]
			if r.rank < best.rank {
				best = r
			}
			size = max(size, r.size)
		}
		addrs = append(addrs, addr)
		names = append(names, best.name)
		sizes = append(sizes, size)
		secEnds = append(secEnds, best.secEnd)
	}
	n := len(addrs)
	ends := make([]byte, 0, 8*n)
	for i := range n {
		if sizes[i] > 0 {
			e := addrs[i] + sizes[i]
			if e < addrs[i] {
				e = ^uint64(0)
			}
			ends = le.AppendUint64(ends, e)
			continue
		}
		// No size (assembly): up to the next symbol, within the section.
		e := secEnds[i]
		if i+1 < n && addrs[i+1] < e {
			e = addrs[i+1]
		}
		if e <= addrs[i] {
			e = addrs[i] + 1
		}
		ends = le.AppendUint64(ends, e)
	}
	nameEnds := make([]byte, 0, 4*n)
	var all strings.Builder
	for _, nm := range names {
		all.WriteString(nm)
		nameEnds = le.AppendUint32(nameEnds, uint32(all.Len()))
	}
	return &symTable{addr: addrs, ends: ends, nameEnds: nameEnds, names: all.String(), count: n}
}

// sortByAddr returns the indexes of raw sorted by address, then index (so
// the aliases at one address stay in collection order). Typed, without
// reflection; when addresses fit 40 bits and indexes 24 (every table met in
// practice) each key is one uint64 and the sort calls no function.
func sortByAddr(raw []rawSym) []int32 {
	const seqBits = 24
	packed := len(raw) < 1<<seqBits
	for i := range raw {
		if raw[i].addr >= 1<<(64-seqBits) {
			packed = false
			break
		}
	}
	order := make([]int32, len(raw))
	if packed {
		keys := make([]uint64, len(raw))
		for i := range raw {
			keys[i] = raw[i].addr<<seqBits | uint64(i)
		}
		slices.Sort(keys)
		for k, key := range keys {
			order[k] = int32(key & (1<<seqBits - 1))
		}
		return order
	}
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(raw[a].addr, raw[b].addr); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
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
		if pc < t.end(i) {
			return i, true
		}
	}
	return 0, false
}

// nameAt returns the (demangled on first use) name of symbol i.
func (t *symTable) nameAt(i int, demangle bool) string {
	if !demangle {
		return t.name(i)
	}
	t.demMu.Lock()
	d, ok := t.dem[i]
	t.demMu.Unlock()
	if ok {
		return d
	}
	d = Demangle(t.name(i))
	t.demMu.Lock()
	if t.dem == nil {
		t.dem = map[int]string{}
	}
	t.dem[i] = d
	t.demMu.Unlock()
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
