package symtab

import (
	"fmt"
	"unsafe"

	"stackshot/internal/bin"
	"stackshot/internal/diskcache"
)

// kindSymbols is a module's merged symbol table (every table of the binary
// and its debug file, as buildSymTable makes it) and the names of the
// sources it came from.
const kindSymbols = "symbols"

// symbolsFormat names the layout of a symbols entry in its key: an entry
// of another layout is another key, never read as this one.
const symbolsFormat = "sym2"

// symbolsKey is the cache key of the symbol table of file with its debug
// file debug (nil: none): both files' identities are in the key.
func symbolsKey(file, debug *openFile) (diskcache.Key, bool) {
	dbg := "none"
	if debug != nil {
		if debug.buildID == "" || debug.ino == 0 {
			return diskcache.Key{}, false
		}
		dbg = fmt.Sprintf("%s/%d/%d/%d/%d", debug.buildID, debug.size, debug.dev, debug.ino, debug.ctime)
	}
	return dwarfKey(file, nil, kindSymbols, symbolsFormat+" debug="+dbg)
}

// encodeSymbols lays a symbol table out as decodeSymbols uses it in place:
// the sources' names, the count n, n addresses (u64), n ends (u64), n
// name ends (u32, offsets into the names), the names one after another.
func encodeSymbols(t *symTable, sources []string) []byte {
	size := 8
	for _, s := range sources {
		size += 4 + len(s)
	}
	n := 0
	if t != nil {
		n = t.count
		size += 20*n + len(t.names)
	}
	out := le.AppendUint32(make([]byte, 0, size), uint32(len(sources)))
	for _, s := range sources {
		out = appendString(out, s)
	}
	out = le.AppendUint32(out, uint32(n))
	if n == 0 {
		return out
	}
	for _, a := range t.addr {
		out = le.AppendUint64(out, a)
	}
	out = append(out, t.ends...)
	out = append(out, t.nameEnds...)
	return append(out, t.names...)
}

// decodeSymbols checks a symbols entry (addresses strictly increasing,
// each end past its address, names in order inside the entry) and makes
// the table of it: the addresses are copied out, the ends and names are
// used where they lie in b, which must not change afterwards.
func decodeSymbols(b []byte) (*symTable, []string, error) {
	r := bin.NewReader(b, le)
	k := count(r, 4)
	if k > 16 {
		return nil, nil, errBadEntry
	}
	sources := make([]string, 0, k)
	for range k {
		sources = append(sources, readString(r))
	}
	n := count(r, 20)
	if n > maxSymbols {
		return nil, nil, errBadEntry
	}
	if n == 0 {
		if r.Err() != nil || r.Left() != 0 {
			return nil, nil, errBadEntry
		}
		return nil, sources, nil
	}
	addrs := r.Bytes(uint64(8 * n))
	ends := r.Bytes(uint64(8 * n))
	nameEnds := r.Bytes(uint64(4 * n))
	if r.Err() != nil {
		return nil, nil, errBadEntry
	}
	names := r.Rest()
	t := &symTable{addr: make([]uint64, n), ends: ends, nameEnds: nameEnds, count: n}
	prevName := uint32(0)
	for i := range n {
		a, e, ne := le.Uint64(addrs[8*i:]), le.Uint64(ends[8*i:]), le.Uint32(nameEnds[4*i:])
		if e <= a || i > 0 && a <= t.addr[i-1] || ne < prevName {
			return nil, nil, errBadEntry
		}
		t.addr[i], prevName = a, ne
	}
	if uint64(prevName) != uint64(len(names)) {
		return nil, nil, errBadEntry
	}
	t.names = unsafe.String(unsafe.SliceData(names), len(names)) // (b is the table's now)
	return t, sources, nil
}
