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

// FileID is what a cache key holds of a file: its build id and what
// fstat says of it (a file rewritten in place is another file).
type FileID struct {
	BuildID  string
	Size     int64
	Dev, Ino uint64
	Ctime    int64 // status change time (ns)
}

func (f *openFile) id() FileID {
	return FileID{BuildID: f.buildID, Size: f.size, Dev: f.dev, Ino: f.ino, Ctime: f.ctime}
}

// symbolsEntryKey is the cache key of the symbol table of file with its
// debug file debug (nil: none): both files' identities are in the key.
func symbolsEntryKey(file, debug *openFile) (diskcache.Key, bool) {
	if file.sym == nil || file.sym.opts.Cache == nil {
		return diskcache.Key{}, false
	}
	var dbg *FileID
	if debug != nil {
		id := debug.id()
		dbg = &id
	}
	return symbolsKey(file.id(), dbg)
}

// NamingKeys are the cache keys a symbolizer with a cache asks for first
// when it names addresses of the module of file file, whose separate
// debug file is debug (nil: none): its symbol table's and, unless it
// names functions only (Options.NamesOnly), the unit index and units of
// the file that holds its DWARF, as they are keyed when it has no dwz
// file. A sandboxed symbolizer's parent hands the entries over before
// they are asked for (package sandbox).
func NamingKeys(file FileID, debug *FileID, namesOnly bool) []diskcache.Key {
	var keys []diskcache.Key
	if k, ok := symbolsKey(file, debug); ok {
		keys = append(keys, k)
	}
	if namesOnly {
		return keys
	}
	dwarfFile := file
	if debug != nil {
		dwarfFile = *debug
	}
	for _, kp := range [][2]string{{kindDWARFIndex, "index"}, {kindDWARFUnits, "units"}} {
		if k, ok := cacheKey(dwarfFile, "", kp[0], kp[1]); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

func symbolsKey(file FileID, debug *FileID) (diskcache.Key, bool) {
	dbg := "none"
	if debug != nil {
		if debug.BuildID == "" || debug.Ino == 0 {
			return diskcache.Key{}, false
		}
		dbg = fmt.Sprintf("%s/%d/%d/%d/%d", debug.BuildID, debug.Size, debug.Dev, debug.Ino, debug.Ctime)
	}
	return cacheKey(file, "", kindSymbols, symbolsFormat+" debug="+dbg)
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
