package symtab

import (
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"stackshot/internal/bin"
	"stackshot/internal/diskcache"
)

// What a warm run reads from the cache instead of DWARF: a module's unit
// index (which unit holds which addresses) and each decoded unit (line
// rows, function and inline tree, names). Entries are checked by the cache
// (key, length, checksum); their content is then checked here as hostile:
// every count is bounded by the bytes left before anything is allocated,
// every index points inside its table, and tables are sorted as lookups
// need. An entry that fails is decoded again from DWARF.

// Cache kinds; bump dwarfCacheVersion when what they encode changes.
const (
	kindDWARFIndex    = "dwarf-index"
	kindDWARFUnits    = "dwarf-units"
	dwarfCacheVersion = 2 // 2: a unit's strings in a table
)

var errBadEntry = errors.New("bad cached DWARF entry")

// unitPack is a module's decoded units, kept in the cache as one entry
// (one file per unit cost 0.3-0.7 ms each to create on a loaded machine,
// and symbolizing 10,000 addresses of libc decodes 1,200 units). The
// entry is read on the first unit a run needs. It is written by
// Symbolizer.Flush at the end of a command and, while it is small (the
// first 8 new units, under smallPack bytes), after each new unit, so a
// short run cut off before its end leaves what it decoded. A large pack
// is written once: rewritten at each step, libcephfs's 14 units of 2 MB
// each made a cold run write 130 MB for a 29 MB entry.
type unitPack struct {
	once    sync.Once
	key     diskcache.Key
	cached  bool
	mu      sync.Mutex
	units   map[dwarf.Offset][]byte // encoded, from the entry or decoded in this run
	bytes   int                     // of units' encodings
	fresh   int                     // units decoded in this run
	pending bool                    // decoded since the last write
}

// smallPack is the size up to which a pack is rewritten after each of
// its first new units.
const smallPack = 1 << 20

// packedUnit returns the encoded unit at off from the module's pack.
func (x *dwarfIndex) packedUnit(off dwarf.Offset) ([]byte, bool) {
	p := &x.pack
	p.once.Do(func() {
		p.units = map[dwarf.Offset][]byte{}
		if x.file == nil {
			return
		}
		p.key, p.cached = dwarfKey(x.file, x.alt, kindDWARFUnits, "units")
		if !p.cached {
			return
		}
		x.file.sym.registerPack(x)
		if b, ok := x.file.sym.cacheGet(p.key); ok {
			if units, err := decodePack(b); err == nil {
				p.units = units
				for _, u := range units {
					p.bytes += len(u)
				}
			}
		}
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.units[off]
	return b, ok
}

// addToPack keeps a unit decoded in this run and writes the pack while
// it is small (see unitPack).
func (x *dwarfIndex) addToPack(off dwarf.Offset, dec *cuDecoded) {
	p := &x.pack
	if !p.cached {
		return
	}
	b := encodeUnit(dec)
	p.mu.Lock()
	p.bytes += len(b) - len(p.units[off])
	p.units[off] = b
	p.fresh++
	p.pending = true
	write := p.fresh <= 8 && p.bytes <= smallPack
	p.mu.Unlock()
	if write {
		x.writePack()
	}
}

// writePack writes the module's pack if it changed since the last write.
func (x *dwarfIndex) writePack() {
	p := &x.pack
	p.mu.Lock()
	if !p.pending || !p.cached {
		p.mu.Unlock()
		return
	}
	p.pending = false
	b := encodePack(p.units)
	p.mu.Unlock()
	x.file.sym.opts.Cache.Put(p.key, b)
}

func encodePack(units map[dwarf.Offset][]byte) []byte {
	offs := make([]dwarf.Offset, 0, len(units))
	size := 4
	for off, b := range units {
		offs = append(offs, off)
		size += 12 + len(b)
	}
	slices.Sort(offs)
	out := le.AppendUint32(make([]byte, 0, size), uint32(len(offs)))
	for _, off := range offs {
		out = le.AppendUint64(out, uint64(off))
		out = le.AppendUint32(out, uint32(len(units[off])))
	}
	for _, off := range offs {
		out = append(out, units[off]...)
	}
	return out
}

// decodePack checks a pack's table (offsets strictly increasing, lengths
// adding up to the bytes left) and returns each unit's bytes, decoded
// (and checked) only when looked up.
func decodePack(b []byte) (map[dwarf.Offset][]byte, error) {
	r := bin.NewReader(b, le)
	n := count(r, 12)
	offs := make([]uint64, n)
	lens := make([]uint32, n)
	total := uint64(0)
	for i := range n {
		offs[i], lens[i] = r.U64(), r.U32()
		if i > 0 && offs[i] <= offs[i-1] || offs[i] > 1<<62 {
			return nil, errBadEntry
		}
		total += uint64(lens[i])
	}
	if r.Err() != nil || total != uint64(r.Left()) {
		return nil, errBadEntry
	}
	rest := r.Rest()
	units := make(map[dwarf.Offset][]byte, n)
	for i := range n {
		units[dwarf.Offset(offs[i])] = rest[:lens[i]:lens[i]]
		rest = rest[lens[i]:]
	}
	return units, nil
}

// dwarfKey is the cache key of part of f's DWARF, alt being the dwz file
// its names were read through (names differ without it).
func dwarfKey(f *openFile, alt *altDWARF, kind, part string) (diskcache.Key, bool) {
	if f.sym == nil || f.sym.opts.Cache == nil || f.buildID == "" || f.ino == 0 {
		return diskcache.Key{}, false
	}
	altID := "none"
	if alt != nil && alt.file != nil {
		altID = alt.file.buildID
	}
	return diskcache.Key{Kind: kind, BuildID: f.buildID, Size: f.size, Dev: f.dev, Ino: f.ino, Ctime: f.ctime,
		Part: fmt.Sprintf("v%d %s alt=%s", dwarfCacheVersion, part, altID)}, true
}

var le = binary.LittleEndian

func encodeIndex(x *dwarfIndex) []byte {
	out := le.AppendUint32(nil, uint32(len(x.cus)))
	for _, cu := range x.cus {
		out = le.AppendUint64(out, uint64(cu.off))
	}
	out = le.AppendUint32(out, uint32(len(x.rng)))
	for _, r := range x.rng {
		out = le.AppendUint64(out, r.lo)
		out = le.AppendUint64(out, r.hi)
		out = le.AppendUint32(out, uint32(r.cu))
	}
	return out
}

// count reads a count of records of at least min bytes each, refused when
// the bytes left cannot hold them.
func count(r *bin.Reader, min int) int {
	n := r.U32()
	if r.Err() != nil || uint64(n)*uint64(min) > uint64(r.Left()) {
		r.Fail(errBadEntry)
		return 0
	}
	return int(n)
}

// decodeIndex checks and decodes an index entry of a .debug_info of
// infoSize bytes.
func decodeIndex(b []byte, infoSize uint64) ([]*cuInfo, []cuRange, error) {
	r := bin.NewReader(b, le)
	n := count(r, 8)
	cus := make([]*cuInfo, 0, n)
	for range n {
		off := r.U64()
		if off >= infoSize || off > 1<<62 || len(cus) > 0 && off <= uint64(cus[len(cus)-1].off) {
			return nil, nil, errBadEntry
		}
		cus = append(cus, &cuInfo{off: dwarf.Offset(off)})
	}
	m := count(r, 20)
	rng := make([]cuRange, 0, m)
	for range m {
		c := cuRange{lo: r.U64(), hi: r.U64(), cu: int32(r.U32())}
		if c.lo >= c.hi || c.cu < 0 || int(c.cu) >= len(cus) || len(rng) > 0 && c.lo < rng[len(rng)-1].lo {
			return nil, nil, errBadEntry
		}
		rng = append(rng, c)
	}
	if r.Err() != nil || r.Left() != 0 {
		return nil, nil, errBadEntry
	}
	return cus, rng, nil
}

func appendString(out []byte, s string) []byte {
	return append(le.AppendUint32(out, uint32(len(s))), s...)
}

// A unit's encoding: its strings once each (C++ names repeat: each
// inlined call of a function carries its linkage name, and libcephfs's
// units hold 13.7 MB of names of which 2.4 MB differ), then the line
// rows, the line table's files, the functions' ranges and the nodes,
// strings as indexes into the table.

// unitStrings numbers dec's distinct strings (files, then node names) in
// the order of their first use.
func unitStrings(dec *cuDecoded) (table []string, index map[string]uint32) {
	index = make(map[string]uint32, len(dec.files)+len(dec.nodes)/4)
	add := func(s string) {
		if _, ok := index[s]; !ok {
			index[s] = uint32(len(table))
			table = append(table, s)
		}
	}
	for _, f := range dec.files {
		add(f)
	}
	for i := range dec.nodes {
		add(dec.nodes[i].name)
	}
	return table, index
}

// unitSize is the size of dec's encoding with the string table table.
func unitSize(dec *cuDecoded, table []string) int {
	n := 20 + 4*len(table) + 17*len(dec.rows) + 4*len(dec.files) + 20*len(dec.funcs)
	for _, s := range table {
		n += len(s)
	}
	for i := range dec.nodes {
		nd := &dec.nodes[i]
		n += 33 + 16*len(nd.ranges) + 4*len(nd.children)
	}
	return n
}

func encodeUnit(dec *cuDecoded) []byte {
	table, index := unitStrings(dec)
	out := le.AppendUint32(make([]byte, 0, unitSize(dec, table)), uint32(len(table)))
	for _, s := range table {
		out = appendString(out, s)
	}
	out = le.AppendUint32(out, uint32(len(dec.rows)))
	for _, r := range dec.rows {
		out = le.AppendUint64(out, r.addr)
		out = le.AppendUint32(out, uint32(r.file))
		out = le.AppendUint32(out, uint32(r.line))
		end := byte(0)
		if r.end {
			end = 1
		}
		out = append(out, end)
	}
	out = le.AppendUint32(out, uint32(len(dec.files)))
	for _, f := range dec.files {
		out = le.AppendUint32(out, index[f])
	}
	out = le.AppendUint32(out, uint32(len(dec.funcs)))
	for _, f := range dec.funcs {
		out = le.AppendUint64(out, f.lo)
		out = le.AppendUint64(out, f.hi)
		out = le.AppendUint32(out, uint32(f.node))
	}
	out = le.AppendUint32(out, uint32(len(dec.nodes)))
	for _, n := range dec.nodes {
		out = le.AppendUint32(out, index[n.name])
		out = le.AppendUint32(out, uint32(len(n.ranges)))
		for _, rg := range n.ranges {
			out = le.AppendUint64(out, rg[0])
			out = le.AppendUint64(out, rg[1])
		}
		out = le.AppendUint64(out, n.entry)
		out = le.AppendUint32(out, uint32(n.parent))
		out = le.AppendUint32(out, uint32(len(n.children)))
		for _, c := range n.children {
			out = le.AppendUint32(out, uint32(c))
		}
		out = le.AppendUint32(out, uint32(n.callFile))
		out = le.AppendUint32(out, uint32(n.callLine))
		plain := byte(0)
		if n.plain {
			plain = 1
		}
		out = append(out, plain)
	}
	return out
}

// readStrings reads a unit's string table: its bytes copied once, each
// string a piece of them.
func readStrings(r *bin.Reader) []string {
	n := count(r, 4)
	if n == 0 {
		return nil
	}
	start := r.Rest()
	ends := make([]uint32, n)
	total := uint64(0)
	for i := range n {
		l := r.U32()
		if uint64(l) > uint64(r.Left()) {
			r.Fail(errBadEntry)
			return nil
		}
		r.Bytes(uint64(l))
		total += 4 + uint64(l)
		ends[i] = uint32(total)
	}
	if r.Err() != nil || total > math.MaxUint32 {
		r.Fail(errBadEntry)
		return nil
	}
	all := string(start[:total]) // one copy; each string a substring of it
	table := make([]string, n)
	prev := uint32(0)
	for i, e := range ends {
		table[i] = all[prev+4 : e]
		prev = e
	}
	return table
}

// stringAt is table[i], or a failed read.
func stringAt(r *bin.Reader, table []string) string {
	i := r.U32()
	if r.Err() != nil || uint64(i) >= uint64(len(table)) {
		r.Fail(errBadEntry)
		return ""
	}
	return table[i]
}

func readString(r *bin.Reader) string {
	n := r.U32()
	if uint64(n) > uint64(r.Left()) {
		r.Fail(errBadEntry)
		return ""
	}
	return string(r.Bytes(uint64(n)))
}

func readBool(r *bin.Reader) bool {
	switch r.U8() {
	case 0:
		return false
	case 1:
		return true
	}
	r.Fail(errBadEntry)
	return false
}

// decodeUnit checks and decodes a unit entry.
func decodeUnit(b []byte) (*cuDecoded, error) {
	r := bin.NewReader(b, le)
	dec := &cuDecoded{}
	table := readStrings(r)
	n := count(r, 17)
	dec.rows = make([]lineRow, 0, n)
	dec.raddr = make([]uint64, 0, n)
	for range n {
		row := lineRow{addr: r.U64(), file: int32(r.U32()), line: int32(r.U32()), end: readBool(r)}
		if k := len(dec.rows); k > 0 && row.addr < dec.rows[k-1].addr {
			return nil, errBadEntry
		}
		dec.rows = append(dec.rows, row)
		dec.raddr = append(dec.raddr, row.addr)
	}
	n = count(r, 4)
	dec.files = make([]string, 0, n)
	for range n {
		dec.files = append(dec.files, stringAt(r, table))
	}
	n = count(r, 20)
	dec.funcs = make([]fnRange, 0, n)
	for range n {
		dec.funcs = append(dec.funcs, fnRange{lo: r.U64(), hi: r.U64(), node: int32(r.U32())})
	}
	n = count(r, 4+4+8+4+4+4+4+1)
	dec.nodes = make([]fnNode, 0, n)
	for range n {
		nd := fnNode{name: stringAt(r, table)}
		k := count(r, 16)
		if k > maxRangesPerDIE {
			return nil, errBadEntry
		}
		nd.ranges = make([][2]uint64, 0, k)
		for range k {
			nd.ranges = append(nd.ranges, [2]uint64{r.U64(), r.U64()})
		}
		nd.entry, nd.parent = r.U64(), int32(r.U32())
		k = count(r, 4)
		if k > 0 {
			nd.children = make([]int32, 0, k)
		}
		for range k {
			nd.children = append(nd.children, int32(r.U32()))
		}
		nd.callFile, nd.callLine, nd.plain = int32(r.U32()), int32(r.U32()), readBool(r)
		dec.nodes = append(dec.nodes, nd)
		if r.Err() != nil {
			return nil, errBadEntry
		}
	}
	if r.Err() != nil || r.Left() != 0 {
		return nil, errBadEntry
	}
	// Every index inside its table; functions sorted as findFunc needs.
	nn := int32(len(dec.nodes))
	for i, f := range dec.funcs {
		if f.node < 0 || f.node >= nn || i > 0 && f.lo < dec.funcs[i-1].lo {
			return nil, errBadEntry
		}
	}
	for _, nd := range dec.nodes {
		if nd.parent < -1 || nd.parent >= nn || slices.ContainsFunc(nd.children, func(c int32) bool { return c < 0 || c >= nn }) {
			return nil, errBadEntry
		}
	}
	dec.dem = make([]atomic.Pointer[string], len(dec.nodes))
	return dec, nil
}
