package symtab

import (
	"cmp"
	"debug/dwarf"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"stackshot/internal/bin"
	"stackshot/internal/contain"
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
	dwarfCacheVersion = 4 // 2: line rows as LEB128 changes, or a unit's strings in a table; 3: both; 4: a "." compilation directory left out of file names
)

var errBadEntry = errors.New("bad cached DWARF entry")

// unitPack is a module's decoded units, kept in the cache as one entry
// (one file per unit cost 0.3-0.7 ms each to create on a loaded machine,
// and symbolizing 10,000 addresses of libc decodes 1,200 units). The
// entry is read on the first unit a run needs and written by
// Symbolizer.Flush at the end of a command with the units decoded since.
// So that a run cut short still keeps most of its work, it is also
// written when the count of new units reaches 16, 64, 256, 1,024 (powers
// of four: each write encodes the whole entry), by a goroutine of its own
// beside the decoding (on a cold run the other core is mostly idle): the
// lookups never wait for a write, and a dump, which decodes a dozen
// units, writes its pack once. (Writing after each of the first 8 units,
// as before, cost a cold dump eight file creations.)
type unitPack struct {
	once    sync.Once
	key     diskcache.Key
	cached  bool
	mu      sync.Mutex
	units   map[dwarf.Offset]packEntry
	fresh   int           // units decoded in this run
	pending bool          // decoded since the last write
	writing chan struct{} // closed when the background write ends; nil: none runs

	// Units being encoded ahead of the write (see addToPack), and the
	// signal of their end (on mu).
	encoding int
	encoded  *sync.Cond
}

// packedUnit returns the encoded unit at off from the module's pack.
func (x *dwarfIndex) packedUnit(off dwarf.Offset) ([]byte, bool) {
	p := &x.pack
	p.once.Do(func() {
		p.units = map[dwarf.Offset]packEntry{}
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
				for off, b := range units {
					p.units[off] = packEntry{b: b}
				}
			}
		}
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.units[off]
	return e.b, e.b != nil
}

// packEntry is a unit of the pack: encoded (read from the entry, or
// encoded by a write, then in that write's payload) or, decoded in this
// run and not written yet, as decoded (its tables never change once
// decoded).
type packEntry struct {
	b   []byte
	dec *cuDecoded
}

// addToPack keeps a unit decoded in this run and starts a background
// write of the pack when the count of new units reaches the next step
// and no write runs (the units decoded meanwhile wait for the next step
// or for Flush).
func (x *dwarfIndex) addToPack(off dwarf.Offset, dec *cuDecoded) {
	p := &x.pack
	if !p.cached {
		return
	}
	p.mu.Lock()
	p.units[off] = packEntry{dec: dec}
	p.fresh++
	p.pending = true
	n := p.fresh
	start := n >= 16 && n&(n-1) == 0 && bits.TrailingZeros(uint(n))%2 == 0 && p.writing == nil
	var done chan struct{}
	if start {
		done = make(chan struct{})
		p.writing = done
	}
	if p.encoded == nil {
		p.encoded = sync.NewCond(&p.mu)
	}
	p.encoding++
	p.mu.Unlock()
	// The unit is encoded now, by a goroutine of its own: on a cold run
	// the decoding leaves a core idle at times (a lookup waiting for the
	// unit another goroutine decodes, the last lookups after the last
	// unit), and encoding every unit at the end, in the write Flush waits
	// for, cost libcephfs's cold run 40-75 ms on one core after its
	// last lookup (14 units, 16 MB encoded).
	go func() {
		defer func() {
			p.mu.Lock()
			p.encoding--
			p.encoded.Broadcast()
			p.mu.Unlock()
		}()
		var b []byte
		if contain.Call("cache encode", func() { b = encodeUnit(dec) }) != nil {
			return // (a bug: the write encodes it again, or meets it)
		}
		p.mu.Lock()
		if e := p.units[off]; e.dec == dec && e.b == nil {
			p.units[off] = packEntry{b: b, dec: dec}
		}
		p.mu.Unlock()
	}()
	if start {
		go func() {
			defer func() {
				p.mu.Lock()
				p.writing = nil
				p.mu.Unlock()
				close(done)
			}()
			// A panic here (a bug) must not end the run: the write is
			// only a cache's.
			_ = contain.Call("cache write", x.writePackNow)
		}()
	}
}

// writePack writes the module's pack if it changed since the last write,
// after any background write has ended (Flush: the last write is the
// whole pack).
func (x *dwarfIndex) writePack() {
	p := &x.pack
	p.mu.Lock()
	for p.encoding > 0 {
		p.encoded.Wait() // (joined, not encoded a second time)
	}
	done := p.writing
	p.mu.Unlock()
	if done != nil {
		<-done
	}
	x.writePackNow()
}

// writePackNow encodes and writes the pack if it changed since the last
// write. The units are taken under the lock, encoded and written outside
// it; each unit then keeps its encoded bytes (encoded once in a run).
func (x *dwarfIndex) writePackNow() {
	p := &x.pack
	p.mu.Lock()
	if !p.pending || !p.cached {
		p.mu.Unlock()
		return
	}
	p.pending = false
	units := make([]packedUnit, 0, len(p.units))
	for off, e := range p.units {
		units = append(units, packedUnit{off, e})
	}
	p.mu.Unlock()
	parts := encodePack(units)
	p.mu.Lock()
	for _, u := range units {
		p.units[u.off] = u.packEntry
	}
	p.mu.Unlock()
	putParts(x.file.sym.opts.Cache, p.key, parts)
}

// packedUnit is one unit of a pack, by the offset of its DIE.
type packedUnit struct {
	off dwarf.Offset
	packEntry
}

// encodePack encodes units (reordered by offset): the pack's table, then
// each unit's bytes (encoded now if it was not yet), as the parts of the
// entry, not copied into one buffer.
func encodePack(units []packedUnit) [][]byte {
	slices.SortFunc(units, func(a, b packedUnit) int { return cmp.Compare(a.off, b.off) })
	table := le.AppendUint32(make([]byte, 0, 4+12*len(units)), uint32(len(units)))
	parts := make([][]byte, 1, 1+len(units))
	for i := range units {
		u := &units[i]
		if u.b == nil {
			u.b = encodeUnit(u.dec) // (its strings numbered once: sized, then written)
		}
		table = le.AppendUint64(table, uint64(u.off))
		table = le.AppendUint32(table, uint32(len(u.b)))
		parts = append(parts, u.b)
		u.packEntry = packEntry{b: u.b}
	}
	parts[0] = table
	return parts
}

// putParts stores the payload made of parts in c: as they are when c
// writes parts (diskcache.Cache.PutParts), else joined.
func putParts(c Cache, k diskcache.Key, parts [][]byte) {
	if pc, ok := c.(interface {
		PutParts(diskcache.Key, ...[]byte) error
	}); ok {
		pc.PutParts(k, parts...) // best effort, as every write
		return
	}
	c.Put(k, slices.Concat(parts...))
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
	if f.sym == nil || f.sym.opts.Cache == nil {
		return diskcache.Key{}, false
	}
	altID := ""
	if alt != nil && alt.file != nil {
		altID = alt.file.buildID
	}
	return cacheKey(f.id(), altID, kind, part)
}

// cacheKey is the key of the entry kind, part part, of the file file
// whose DWARF has the dwz file of build id altID ("": none).
func cacheKey(file FileID, altID, kind, part string) (diskcache.Key, bool) {
	if file.BuildID == "" || file.Ino == 0 {
		return diskcache.Key{}, false
	}
	if altID == "" {
		altID = "none"
	}
	return diskcache.Key{Kind: kind, BuildID: file.BuildID, Size: file.Size, Dev: file.Dev, Ino: file.Ino, Ctime: file.Ctime,
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

func encodeUnit(dec *cuDecoded) []byte {
	table, index := unitStrings(dec)
	return appendUnit(make([]byte, 0, unitSize(dec, table)), dec, table, index)
}

// Line rows are most of a unit (1.6 of glibc's 2.8 MB of units at 17
// bytes a row): each is stored as three LEB128 numbers, the address's
// increase, the file index and end flag (file<<1 | end), and the line's
// change (zigzag), 3 to 4 bytes for most rows.

// rowFields returns what encodes row r after row prev.
func rowFields(prev, r lineRow) (addr, fileEnd, line uint64) {
	fileEnd = uint64(uint32(r.file)) << 1
	if r.end {
		fileEnd |= 1
	}
	d := int64(r.line) - int64(prev.line)
	return r.addr - prev.addr, fileEnd, uint64(d<<1) ^ uint64(d>>63)
}

// lebLen is the size of v as an unsigned LEB128 number.
func lebLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// unitSize is the size of dec encoded with the string table table.
func unitSize(dec *cuDecoded, table []string) int {
	n := 4 + 4*len(table) + 4 + 4 + 4*len(dec.files) + 4 + 20*len(dec.funcs) + 4
	for _, s := range table {
		n += len(s)
	}
	prev := lineRow{}
	for _, r := range dec.rows {
		a, f, l := rowFields(prev, r)
		n += lebLen(a) + lebLen(f) + lebLen(l)
		prev = r
	}
	for i := range dec.nodes {
		nd := &dec.nodes[i]
		n += 4 + 4 + 16*len(nd.ranges) + 8 + 4 + 4 + 4*len(nd.children) + 4 + 4 + 1
	}
	return n
}

// appendUnit appends dec encoded to out: its string table (table,
// numbered by index), the line rows, the line table's files, the
// functions' ranges and the nodes, strings as indexes into the table.
func appendUnit(out []byte, dec *cuDecoded, table []string, index map[string]uint32) []byte {
	out = le.AppendUint32(out, uint32(len(table)))
	for _, s := range table {
		out = appendString(out, s)
	}
	out = le.AppendUint32(out, uint32(len(dec.rows)))
	prev := lineRow{}
	for _, r := range dec.rows {
		a, f, l := rowFields(prev, r)
		out = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(out, a), f), l)
		prev = r
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
	n := count(r, 3)
	dec.rows = make([]lineRow, 0, n)
	dec.raddr = make([]uint64, 0, n)
	prev := lineRow{}
	for range n {
		da, fe, zl := r.ULEB(), r.ULEB(), r.ULEB()
		dl := int64(zl>>1) ^ -int64(zl&1)
		row := lineRow{addr: prev.addr + da, file: int32(uint32(fe >> 1)), line: int32(int64(prev.line) + dl), end: fe&1 == 1}
		// Addresses only grow, without wrapping; no field is cut short.
		if row.addr < prev.addr || fe>>1 > math.MaxUint32 || int64(row.line) != int64(prev.line)+dl {
			return nil, errBadEntry
		}
		dec.rows = append(dec.rows, row)
		dec.raddr = append(dec.raddr, row.addr)
		prev = row
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
