package symtab

import (
	"cmp"
	"context"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// Limits on DWARF input.
const (
	maxUnits        = 1 << 20 // compilation units indexed
	maxLineRows     = 1 << 24 // line rows kept for one unit
	maxUnitDIEs     = 1 << 24 // DIEs walked in one unit
	maxDIEDepth     = 256     // nesting of DIEs
	maxOriginHops   = 8       // abstract_origin/specification chain
	maxRangesPerDIE = 1 << 16
)

// dwarfIndex is a module's DWARF: a sorted table of address ranges to
// compilation units, each unit decoded on first use.
type dwarfIndex struct {
	d     *dwarf.Data // tests: one view of all units, see dataFor
	order binary.ByteOrder
	cus   []*cuInfo
	rng   []cuRange // sorted by lo

	syms *symTable // the module's symbols, for functions without linkage names

	line, str, lineStr []byte // raw sections, for file names as binutils forms them

	alt *altDWARF // the dwz file, or nil

	ctx context.Context // Options.Context: decoding stops when it is done

	file          *openFile    // where the DWARF is read from (nil in tests)
	info, aranges []byte       // raw sections, for the index
	load          func() error // reads the sections when d is nil
	loadOnce      sync.Once
	loadErr       error

	pack unitPack // decoded units kept in the cache

	early *earlyUnits // units decoded as .debug_info came out, or nil

	// Units to decode ahead of the lookups (prefetch), and the
	// goroutines decoding them.
	pmu     sync.Mutex
	pqueue  []*cuInfo
	pactive int

	abbrev      []byte       // raw .debug_abbrev, for the fast DIE walk
	headers     []unitHeader // of .debug_info, parsed on first need
	headersOnce sync.Once
	slowWalk    bool // tests: walk every unit with debug/dwarf alone

	// Views of units (dataFor), or of all units when they cannot be
	// made; d, when set (tests), serves every unit instead.
	dorder      binary.ByteOrder // .debug_info's, as debug/dwarf sniffs it
	ranges      []byte
	extra       map[string][]byte // DWARF 5 sections for AddSection
	emptyAbbrev int               // offset of an empty table in abbrev, or -1
	dmu         sync.Mutex
	datas       map[int]*dwarf.Data // by unit index in unitHeaders
	full        *dwarf.Data
}

// ctxCheckEvery is how many DIEs, line rows or units are decoded between
// two looks at the context.
const ctxCheckEvery = 4096

// expired returns the context's error once it is done.
func (x *dwarfIndex) expired() error {
	if x.ctx == nil {
		return nil
	}
	return x.ctx.Err()
}

type cuRange struct {
	lo, hi uint64
	cu     int32
}

// cuInfo is one compilation unit, decoded lazily.
type cuInfo struct {
	off    dwarf.Offset // of the unit's DIE
	once   sync.Once
	dec    *cuDecoded
	queued atomic.Bool // handed to prefetch
}

// cuDecoded holds a unit's line table and its tree of functions and
// inlined subroutines.
type cuDecoded struct {
	rows  []lineRow // sorted by address; see lookupRow
	raddr []uint64  // rows[i].addr, for a cache-friendly search
	files []string  // line table files, by DWARF file index
	funcs []fnRange // ranges of functions, sorted by lo
	nodes []fnNode
	dem   []atomic.Pointer[string] // demangled node names, by node
	err   error
}

type lineRow struct {
	addr uint64
	file int32
	line int32
	end  bool // end_sequence: no line at or after addr
}

type fnRange struct {
	lo, hi uint64
	node   int32
}

// fnNode is a function (parent < 0) or an inlined subroutine.
type fnNode struct {
	name     string // raw (linkage name preferred)
	ranges   [][2]uint64
	entry    uint64
	parent   int32
	children []int32
	callFile int32
	callLine int32
	plain    bool // no linkage name: a symbol at entry names it better
}

// loadDWARF builds the index of the DWARF sections of f; alt is the dwz
// file it refers to, or nil.
func loadDWARF(f *openFile, alt *altDWARF, pcs []uint64) (*dwarfIndex, error) {
	ef := f.ef
	infoSec := ef.Section(".debug_info")
	if (infoSec == nil || infoSec.Type == elf.SHT_NOBITS) && ef.Section(".zdebug_info") == nil {
		return nil, ErrNoSymbols
	}
	x := &dwarfIndex{order: ef.ByteOrder, alt: alt, file: f}
	if f.sym != nil {
		x.ctx = f.sym.opts.Context
	}
	// A warm run: the unit index from the cache, the DWARF sections read
	// (and dwarf.New run) only when a unit is not cached either.
	key, cached := dwarfKey(f, alt, kindDWARFIndex, "index")
	if cached && infoSec != nil && infoSec.Type != elf.SHT_NOBITS {
		if b, ok := f.sym.cacheGet(key); ok {
			if cus, rng, err := decodeIndex(b, infoSec.Size); err == nil {
				x.cus, x.rng = cus, rng
				x.load = func() error {
					f.putSections.Store(true)
					return x.loadData(f)
				}
				return x, nil
			}
		}
	}
	if err := x.loadDataEarly(f, pcs); err != nil {
		return nil, err
	}
	err := safely("dwarf", func() error { return x.buildIndex(x.info, x.aranges) })
	if err != nil {
		return nil, fmt.Errorf("dwarf: %w", err)
	}
	if cached && x.expired() == nil {
		f.sym.putLater(key, func() []byte { return encodeIndex(x) })
	}
	return x, nil
}

// loadData reads f's DWARF sections and parses them with debug/dwarf.
func (x *dwarfIndex) loadData(f *openFile) error { return x.loadDataEarly(f, nil) }

// loadDataEarly is loadData that, given the first addresses to be looked
// up, decodes their units as .debug_info comes out (see earlyUnits).
func (x *dwarfIndex) loadDataEarly(f *openFile, pcs []uint64) error {
	ef := f.ef
	sec := func(name string) ([]byte, error) {
		s := ef.Section(".debug_" + name)
		if s == nil {
			s = ef.Section(".zdebug_" + name)
		}
		if s == nil || s.Type == elf.SHT_NOBITS {
			return nil, nil
		}
		return f.data(s) // decompressed within the budget
	}
	// Read (and mostly decompress) the sections on both cores: on a cold
	// start this is most of the work. .debug_info, the largest (glibc's
	// 5.8 of 8.5 MB), is read here, at once, the others one after the
	// other by one goroutine beside it: the longest stream starts first
	// and runs alone on its core (ten goroutines, one a section, had it
	// wait its turn behind the small ones, the critical path longer for
	// it). Each read is charged to the Symbolizer's budget before it
	// allocates.
	names := []string{"info", "abbrev", "line", "ranges", "str", "aranges", "addr", "line_str", "str_offsets", "rnglists"}
	datas := make([][]byte, len(names))
	errs := make([]error, len(names))
	read := func(i int) {
		errs[i] = safely("section", func() error {
			var err error
			datas[i], err = sec(names[i])
			return err
		})
	}
	var early *earlyUnits
	if len(pcs) > 0 && x.d == nil {
		early = newEarlyUnits()
	}
	done := make(chan struct{})
	go func() {
		for i := 1; i < len(names); i++ {
			read(i)
		}
		close(done)
		if early == nil {
			return
		}
		defer close(early.finished)
		// The other sections are read: decode early (only reads).
		get := map[string][]byte{}
		for i, n := range names[1:] {
			if errs[i+1] != nil {
				early.stop()
				return
			}
			get[n] = datas[i+1]
		}
		if offs := unitsFor(get["aranges"], x, pcs); len(offs) > 0 {
			_ = safely("dwarf early", func() error { early.run(x, get, offs); return nil })
		}
	}()
	// .debug_info, telling early how far it is.
	errs[0] = safely("section", func() error {
		s := ef.Section(".debug_info")
		if s == nil || s.Type == elf.SHT_NOBITS || early == nil {
			var err error
			datas[0], err = sec(names[0])
			return err
		}
		var err error
		datas[0], err = f.dataProgress(s, early.progress)
		return err
	})
	if early != nil {
		if errs[0] == nil {
			early.end(datas[0])
		} else {
			early.end(nil)
		}
		x.early = early
	}
	<-done
	get := map[string][]byte{}
	for i, n := range names {
		if errs[i] != nil {
			return errs[i]
		}
		get[n] = datas[i]
	}
	return x.setSections(get)
}

// setSections keeps the DWARF sections (by name without ".debug_") for
// the per-unit views (dataFor) and the fast walk.
func (x *dwarfIndex) setSections(get map[string][]byte) error {
	info := get["info"]
	if len(info) == 0 {
		return ErrNoSymbols
	}
	// The byte order as debug/dwarf sniffs it, from the first unit's
	// version.
	p := 4
	if len(info) >= 4 && info[0] == 0xff && info[1] == 0xff && info[2] == 0xff && info[3] == 0xff {
		p = 12
	}
	if len(info) < p+2 {
		return fmt.Errorf("dwarf: %w", &FormatError{Section: ".debug_info", Msg: "too short"})
	}
	switch v0, v1 := info[p], info[p+1]; {
	case v0 == 0 && v1 == 0:
		return fmt.Errorf("dwarf: %w", &FormatError{Section: ".debug_info", Offset: 4, Msg: "unsupported version 0"})
	case v0 == 0:
		x.dorder = binary.BigEndian
	case v1 == 0:
		x.dorder = binary.LittleEndian
	default:
		return fmt.Errorf("dwarf: %w", &FormatError{Section: ".debug_info", Offset: 4, Msg: "cannot determine byte order"})
	}
	x.info, x.aranges, x.abbrev = info, get["aranges"], get["abbrev"]
	x.line, x.str, x.lineStr = get["line"], get["str"], get["line_str"]
	x.ranges, x.extra = get["ranges"], map[string][]byte{}
	for _, n := range []string{"addr", "line_str", "str_offsets", "rnglists"} {
		if get[n] != nil {
			x.extra[".debug_"+n] = get[n]
		}
	}
	x.emptyAbbrev = -1
	if n := len(x.abbrev); n > 0 && x.abbrev[n-1] == 0 && n-1 <= math.MaxUint32 {
		x.emptyAbbrev = n - 1 // a code 0: an empty table
	}
	return nil
}

// dummyUnitBytes is the header of the unit that stands for all units
// before the one a per-unit dwarf.Data is made for (DWARF 4, 32-bit).
const dummyUnitBytes = 11

// dataFor returns a debug/dwarf view of the unit holding the DIE at off.
//
// dwarf.New parses the header and the abbreviation table of every unit
// of .debug_info: on a cold start, a fifth of the CPU of a dump that
// needs a handful of glibc's two thousand units. A per-unit view is made
// by handing dwarf.New the section up to the unit's end with its first
// bytes briefly turned into the header of one dummy unit spanning all
// units before it, whose abbreviations are an empty table: offsets stay
// the section's, and dwarf.New parses two headers and one table. The
// bytes are restored before anything else can read them (only the
// header walk reads them, and it runs before the first patch).
func (x *dwarfIndex) dataFor(off dwarf.Offset) (*dwarf.Data, error) {
	if x.d != nil {
		return x.d, nil
	}
	hs := x.unitHeaders()
	i := sort.Search(len(hs), func(i int) bool { return hs[i].end > uint64(off) })
	if i == len(hs) || uint64(off) < hs[i].off {
		return nil, &FormatError{Section: ".debug_info", Offset: uint64(off), Msg: "offset in no unit"}
	}
	x.dmu.Lock()
	defer x.dmu.Unlock()
	if d := x.datas[i]; d != nil {
		return d, nil
	}
	if x.full != nil {
		return x.full, nil
	}
	d, err := x.unitData(hs[i])
	if err != nil {
		return nil, err
	}
	if d == nil {
		// No dummy possible: one view of every unit, as before.
		if d, err = x.newData(x.info); err != nil {
			return nil, err
		}
		x.full = d
		return d, nil
	}
	if x.datas == nil {
		x.datas = map[int]*dwarf.Data{}
	}
	x.datas[i] = d
	return d, nil
}

// unitData makes the view of the unit h (see dataFor), nil when the
// dummy unit cannot be made. x.dmu is held.
func (x *dwarfIndex) unitData(h unitHeader) (*dwarf.Data, error) {
	info := x.info[:h.end]
	if h.off == 0 {
		return x.newData(info)
	}
	if x.emptyAbbrev < 0 || h.off < dummyUnitBytes || h.off-4 >= 0xfffffff0 {
		return nil, nil
	}
	var saved [dummyUnitBytes]byte
	copy(saved[:], info)
	defer copy(info, saved[:])
	o := x.dorder
	o.PutUint32(info[0:], uint32(h.off-4))
	o.PutUint16(info[4:], 4)
	o.PutUint32(info[6:], uint32(x.emptyAbbrev))
	info[10] = 8
	return x.newData(info)
}

// newData runs dwarf.New on info and the other sections.
func (x *dwarfIndex) newData(info []byte) (*dwarf.Data, error) {
	var d *dwarf.Data
	err := safely("dwarf", func() error {
		var err error
		if d, err = dwarf.New(x.abbrev, nil, nil, info, x.line, nil, x.ranges, x.str); err != nil {
			return err
		}
		for name, b := range x.extra {
			if err := d.AddSection(name, b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dwarf: %w", err)
	}
	return d, nil
}

// data makes sure the DWARF sections are loaded (a module whose index
// came from the cache reads them on its first uncached unit).
func (x *dwarfIndex) data() error {
	x.loadOnce.Do(func() {
		if x.load != nil {
			x.loadErr = x.load()
		}
	})
	if x.loadErr == nil && x.d == nil && x.info == nil {
		return ErrNoSymbols
	}
	return x.loadErr
}

// unitHeader is a compilation unit found in .debug_info.
type unitHeader struct {
	off   uint64 // of the unit header
	die   uint64 // of the unit's first DIE
	end   uint64
	isCU  bool // a compile (or skeleton) unit, not a type or partial unit
	vers  uint16
	addr8 bool

	// For walking the unit's DIEs (dies.go); zero when the header is
	// not one of the known versions.
	abbrevOff uint64
	addrSize  uint8
	offSize   uint8
}

// parseUnitHeaders walks the unit headers of .debug_info.
func parseUnitHeaders(info []byte, order binary.ByteOrder) ([]unitHeader, error) {
	var us []unitHeader
	for off := uint64(0); off < uint64(len(info)); {
		if len(us) >= maxUnits {
			break
		}
		rest := info[off:]
		if len(rest) < 11 {
			return us, &FormatError{Section: ".debug_info", Offset: off, Msg: "short unit header"}
		}
		l := uint64(order.Uint32(rest))
		hdr, offSize := uint64(4), uint64(4)
		if l == 0xffffffff {
			if len(rest) < 23 {
				return us, &FormatError{Section: ".debug_info", Offset: off, Msg: "short unit header"}
			}
			l = order.Uint64(rest[4:])
			hdr, offSize = 12, 8
		} else if l >= 0xfffffff0 {
			return us, &FormatError{Section: ".debug_info", Offset: off, Msg: "reserved unit length"}
		}
		if l > uint64(len(rest))-hdr {
			return us, &FormatError{Section: ".debug_info", Offset: off, Msg: "unit past end of section"}
		}
		u := unitHeader{off: off, end: off + hdr + l}
		body := rest[hdr : hdr+l]
		if len(body) < 2 {
			return us, &FormatError{Section: ".debug_info", Offset: off, Msg: "short unit"}
		}
		u.vers = order.Uint16(body)
		var h uint64
		u.offSize = uint8(offSize)
		readOff := func(p uint64) uint64 {
			if p+offSize > uint64(len(body)) {
				return 0
			}
			if offSize == 8 {
				return order.Uint64(body[p:])
			}
			return uint64(order.Uint32(body[p:]))
		}
		switch {
		case u.vers >= 2 && u.vers <= 4:
			h = 2 + offSize + 1
			u.isCU = true
			u.abbrevOff = readOff(2)
			if h <= uint64(len(body)) {
				u.addrSize = body[2+offSize]
			}
		case u.vers == 5:
			if len(body) < 4 {
				return us, &FormatError{Section: ".debug_info", Offset: off, Msg: "short unit"}
			}
			h = 2 + 1 + 1 + offSize
			u.addrSize = body[3]
			u.abbrevOff = readOff(4)
			switch body[2] {
			case 0x01: // DW_UT_compile
				u.isCU = true
			case 0x04, 0x05: // DW_UT_skeleton, DW_UT_split_compile
				h += 8
				u.isCU = true
			case 0x02, 0x06: // DW_UT_type, DW_UT_split_type
				h += 8 + offSize
			}
		default:
			u.isCU = false
		}
		if h > uint64(len(body)) {
			u.isCU = false
		}
		u.die = off + hdr + h
		us = append(us, u)
		off = u.end
	}
	return us, nil
}

// parseAranges reads .debug_aranges: address ranges per unit header offset.
func parseAranges(b []byte, order binary.ByteOrder, add func(unitOff, lo, hi uint64)) error {
	for off := uint64(0); off < uint64(len(b)); {
		rest := b[off:]
		if len(rest) < 4 {
			return &FormatError{Section: ".debug_aranges", Offset: off, Msg: "short header"}
		}
		l := uint64(order.Uint32(rest))
		hdr, offSize := uint64(4), uint64(4)
		if l == 0xffffffff {
			if len(rest) < 12 {
				return &FormatError{Section: ".debug_aranges", Offset: off, Msg: "short header"}
			}
			l = order.Uint64(rest[4:])
			hdr, offSize = 12, 8
		}
		if l > uint64(len(rest))-hdr {
			return &FormatError{Section: ".debug_aranges", Offset: off, Msg: "set past end of section"}
		}
		set := rest[hdr : hdr+l]
		next := off + hdr + l
		if uint64(len(set)) < 2+offSize+2 {
			return &FormatError{Section: ".debug_aranges", Offset: off, Msg: "short set"}
		}
		var unit uint64
		if offSize == 8 {
			unit = order.Uint64(set[2:])
		} else {
			unit = uint64(order.Uint32(set[2:]))
		}
		asz := uint64(set[2+offSize])
		ssz := uint64(set[3+offSize])
		if asz != 4 && asz != 8 || ssz != 0 {
			off = next
			continue
		}
		// Tuples start at a multiple of twice the address size from the
		// start of the set (counting the length field).
		p := hdr + 2 + offSize + 2
		tup := 2 * asz
		if p%tup != 0 {
			p += tup - p%tup
		}
		p -= hdr
		for p+tup <= uint64(len(set)) {
			var lo, n uint64
			if asz == 8 {
				lo, n = order.Uint64(set[p:]), order.Uint64(set[p+8:])
			} else {
				lo, n = uint64(order.Uint32(set[p:])), uint64(order.Uint32(set[p+4:]))
			}
			p += tup
			if lo == 0 && n == 0 {
				break
			}
			if n != 0 && lo+n > lo {
				add(unit, lo, lo+n)
			}
		}
		off = next
	}
	return nil
}

func (x *dwarfIndex) buildIndex(info, aranges []byte) error {
	units, err := parseUnitHeaders(info, x.order)
	if len(units) == 0 && err != nil {
		return err
	}
	byOff := map[uint64]int32{}
	for _, u := range units {
		if !u.isCU {
			continue
		}
		byOff[u.off] = int32(len(x.cus))
		x.cus = append(x.cus, &cuInfo{off: dwarf.Offset(u.die)})
	}
	covered := make([]bool, len(x.cus))
	if len(aranges) > 0 {
		_ = parseAranges(aranges, x.order, func(unit, lo, hi uint64) {
			if i, ok := byOff[unit]; ok {
				x.rng = append(x.rng, cuRange{lo, hi, i})
				covered[i] = true
			}
		})
	}
	for i, cu := range x.cus {
		if covered[i] {
			continue
		}
		if i%ctxCheckEvery == 0 {
			if err := x.expired(); err != nil {
				return err
			}
		}
		d, err := x.dataFor(cu.off)
		if err != nil {
			continue
		}
		r := d.Reader()
		r.Seek(cu.off)
		e, err := r.Next()
		if err != nil || e == nil || (e.Tag != dwarf.TagCompileUnit && e.Tag != dwarf.TagSkeletonUnit) {
			continue
		}
		rs, err := d.Ranges(e)
		if err != nil {
			continue
		}
		for k, rg := range rs {
			if k >= maxRangesPerDIE {
				break
			}
			if rg[1] > rg[0] {
				x.rng = append(x.rng, cuRange{rg[0], rg[1], int32(i)})
			}
		}
	}
	sort.Slice(x.rng, func(i, j int) bool { return x.rng[i].lo < x.rng[j].lo })
	return nil
}

// findCU returns the unit whose ranges contain pc.
func (x *dwarfIndex) findCU(pc uint64) *cuInfo {
	if i := rangeAt(x.rng, pc); i >= 0 {
		return x.cus[x.rng[i].cu]
	}
	return nil
}

// rangeAt returns the index of a range of rng (sorted by lo) that holds
// pc, looking back over at most 16 of those starting at or below it; -1
// when there is none.
func rangeAt(rng []cuRange, pc uint64) int {
	i := sort.Search(len(rng), func(i int) bool { return rng[i].lo > pc }) - 1
	for k := 0; i >= 0 && k < 16; i, k = i-1, k+1 {
		if pc < rng[i].hi {
			return i
		}
	}
	return -1
}

func (x *dwarfIndex) unit(cu *cuInfo) *cuDecoded {
	cu.once.Do(func() {
		if b, ok := x.packedUnit(cu.off); ok {
			if dec, err := decodeUnit(b); err == nil {
				cu.dec = dec
				return
			}
		}
		dec := &cuDecoded{}
		if edec, ok := x.early.take(x, cu.off); ok {
			dec = edec
		} else if err := x.data(); err != nil {
			dec.err = err
		} else if err := safely("dwarf unit", func() error { return x.decode(cu.off, dec) }); err != nil {
			dec.err = err
		}
		cu.dec = dec
		// Only a whole decode is kept: not one cut short by the deadline
		// or by malformed DWARF.
		if dec.err == nil && x.expired() == nil {
			x.addToPack(cu.off, dec)
		}
	})
	return cu.dec
}

// prefetch queues the units holding pcs that are neither decoded nor
// queued, and keeps up to workers goroutines decoding them. They take the
// queue from its end: the lookups take the units from its start, in the
// order of the addresses, so the two meet in the middle instead of
// waiting on the same unit.
func (x *dwarfIndex) prefetch(pcs []uint64, workers int) {
	var add []*cuInfo
	for _, pc := range pcs {
		if cu := x.findCU(pc); cu != nil && !cu.queued.Load() && cu.queued.CompareAndSwap(false, true) {
			add = append(add, cu)
		}
	}
	if len(add) == 0 {
		return
	}
	x.pmu.Lock()
	x.pqueue = append(x.pqueue, add...)
	start := max(min(workers-x.pactive, len(x.pqueue)), 0)
	x.pactive += start
	x.pmu.Unlock()
	for range start {
		go x.prefetchWorker()
	}
}

// prefetchWorker decodes queued units until the queue is empty or the
// time is out. A unit a lookup is decoding meanwhile is waited for, not
// decoded twice (cuInfo.once).
func (x *dwarfIndex) prefetchWorker() {
	for {
		x.pmu.Lock()
		n := len(x.pqueue)
		if n == 0 || x.expired() != nil {
			x.pqueue = nil
			x.pactive--
			x.pmu.Unlock()
			return
		}
		cu := x.pqueue[n-1]
		x.pqueue = x.pqueue[:n-1]
		x.pmu.Unlock()
		// A parser bug here is the lookup's to meet again (it poisons
		// the module); the worker only stops.
		if safely("dwarf prefetch", func() error { x.unit(cu); return nil }) != nil {
			x.pmu.Lock()
			x.pqueue = nil
			x.pactive--
			x.pmu.Unlock()
			return
		}
	}
}

// nameKey is a reference, as nameInfo holds it.
type nameKey struct {
	ref dwarf.Offset
	alt bool
}

// nameInfo is what a DIE says about a function's name.
type nameInfo struct {
	name, linkage string
	ref           dwarf.Offset // abstract_origin or specification, 0 none
	refAlt        bool         // ref is in the dwz file
}

// dieNameInfo reads a DIE's names and reference; strings and references
// into the dwz file (DW_FORM_GNU_strp_alt, DW_FORM_GNU_ref_alt) are
// followed through alt when there is one.
func dieNameInfo(e *dwarf.Entry, alt *altDWARF) nameInfo {
	var ni nameInfo
	str := func(f *dwarf.Field) string {
		switch v := f.Val.(type) {
		case string:
			return v
		case int64:
			if f.Class == dwarf.ClassStringAlt && alt != nil && v >= 0 {
				return cstrAt(alt.str, uint64(v))
			}
		}
		return ""
	}
	for i := range e.Field {
		f := &e.Field[i]
		switch f.Attr {
		case dwarf.AttrName:
			ni.name = str(f)
		case dwarf.AttrLinkageName, attrMIPSLinkageName:
			ni.linkage = str(f)
		case dwarf.AttrAbstractOrigin, dwarf.AttrSpecification:
			if ni.ref != 0 {
				break
			}
			switch v := f.Val.(type) {
			case dwarf.Offset:
				ni.ref = v
			case int64:
				if f.Class == dwarf.ClassReferenceAlt && alt != nil && v > 0 {
					ni.ref, ni.refAlt = dwarf.Offset(v), true
				}
			}
		}
	}
	return ni
}

// decode walks one unit: its line table and its function tree.
func (x *dwarfIndex) decode(off dwarf.Offset, dec *cuDecoded) error {
	d, err := x.dataFor(off)
	if err != nil {
		return err
	}
	r := d.Reader()
	r.Seek(off)
	cuEntry, err := r.Next()
	if err != nil {
		return err
	}
	if cuEntry == nil {
		return errors.New("no unit entry")
	}
	fileIdx := map[*dwarf.LineFile]int32{}
	if err := x.decodeLines(d, cuEntry, dec, fileIdx); err != nil {
		dec.err = err // keep what was read; the function tree may still help
	}
	if !cuEntry.Children {
		return nil
	}
	w := newDieWalk(x, d, dec)
	w.cu = cuEntry
	if x.slowWalk || !x.walkFast(cuEntry, r, w) {
		// Start again the slow way, from the unit's first child.
		linesErr := dec.err
		dec.nodes, dec.funcs, dec.err = nil, nil, linesErr
		w = newDieWalk(x, d, dec)
		w.cu = cuEntry
		r.Seek(off)
		if _, err := r.Next(); err != nil {
			return err
		}
		x.walkSlow(r, w)
	}
	if len(dec.nodes) == 0 {
		dec.nodes = nil // as a walk that found none leaves it
	}
	// A DIE with no name of its own (an inlined call, a concrete
	// instance) is named by what its reference leads to: the same for
	// every DIE with that reference (libcephfs's units make 350,000
	// lookups for 180,000 nodes without this).
	type resolved struct {
		name  string
		plain bool
	}
	byRef := map[nameKey]resolved{}
	for idx, ni := range w.nodeInfo {
		k := nameKey{ni.ref, ni.refAlt}
		if ni.name == "" && ni.linkage == "" && ni.ref != 0 {
			if r, ok := byRef[k]; ok {
				dec.nodes[idx].name, dec.nodes[idx].plain = r.name, r.plain
				continue
			}
		}
		name, plain := x.resolveName(ni, w.nameAt)
		dec.nodes[idx].name, dec.nodes[idx].plain = name, plain
		if ni.name == "" && ni.linkage == "" && ni.ref != 0 {
			byRef[k] = resolved{name, plain}
		}
	}
	w.names = nil
	sort.Slice(dec.funcs, func(i, j int) bool { return dec.funcs[i].lo < dec.funcs[j].lo })
	dec.dem = make([]atomic.Pointer[string], len(dec.nodes))
	return nil
}

// walkSlow walks a unit's DIEs after its unit DIE with debug/dwarf.
func (x *dwarfIndex) walkSlow(r *dwarf.Reader, w *dieWalk) {
	for n := 0; n < maxUnitDIEs; n++ {
		if n%ctxCheckEvery == 0 {
			if err := x.expired(); err != nil {
				w.dec.err = err
				return
			}
		}
		e, err := r.Next()
		if err != nil {
			w.dec.err = err
			return
		}
		if e == nil {
			return
		}
		if e.Tag == 0 {
			if w.end() {
				return
			}
			continue
		}
		if !w.die(e) {
			return
		}
	}
}

// dieWalk builds a unit's function tree from its DIEs in order.
type dieWalk struct {
	x     *dwarfIndex
	d     *dwarf.Data // the unit's view
	dec   *cuDecoded
	named []namedDIE                // subprograms die took, by offset
	lazy  []lazyDIE                 // subprograms quick stepped over, by offset
	names map[dwarf.Offset]nameInfo // of lazy ones, once read
	// For the fast walk: the unit, its header and an entry reused for
	// each DIE read without debug/dwarf.
	b         []byte
	h         unitHeader
	e         dwarf.Entry
	viaReader int // DIEs the fast walk read through debug/dwarf
	// The unit's DIE, and an entry reused by ranges.
	cu          *dwarf.Entry
	rangesEntry dwarf.Entry
	abbrevs     *abbrevTable
	nodeInfo    []nameInfo // by node
	// active[d] is the function node that DIEs at depth d+1 belong to.
	active []int32
	// scope[d] qualifies names at depth d+1 ("ns::Class::").
	scope []string
	// scopeID[d] is scope[d]'s index in scopes (lazyDIE.scope).
	scopeID []int32
	scopes  []string
}

func newDieWalk(x *dwarfIndex, d *dwarf.Data, dec *cuDecoded) *dieWalk {
	w := &dieWalk{x: x, d: d, dec: dec, names: map[dwarf.Offset]nameInfo{},
		active: make([]int32, 1, 16), scope: make([]string, 1, 16), scopeID: make([]int32, 1, 16), scopes: []string{""}}
	w.active[0] = -1
	return w
}

// end takes a null entry; it returns true when the unit's tree is done.
func (w *dieWalk) end() bool {
	w.active = w.active[:len(w.active)-1]
	w.scope = w.scope[:len(w.scope)-1]
	w.scopeID = w.scopeID[:len(w.scopeID)-1]
	return len(w.active) == 0
}

// other takes a DIE the tree does not need; false stops the walk.
func (w *dieWalk) other(children bool, off dwarf.Offset) bool {
	return w.push(children, w.active[len(w.active)-1], w.scope[len(w.scope)-1], off)
}

func (w *dieWalk) push(children bool, next int32, nextScope string, off dwarf.Offset) bool {
	if !children {
		return true
	}
	if len(w.active) >= maxDIEDepth {
		w.dec.err = &FormatError{Section: ".debug_info", Offset: uint64(off), Msg: "DIEs nested too deep"}
		return false
	}
	w.active = append(w.active, next)
	top := len(w.scope) - 1
	id := w.scopeID[top]
	if nextScope != w.scope[top] {
		id = int32(len(w.scopes))
		w.scopes = append(w.scopes, nextScope)
	}
	w.scope = append(w.scope, nextScope)
	w.scopeID = append(w.scopeID, id)
	return true
}

// die takes a DIE (not a null entry); false stops the walk.
func (w *dieWalk) die(e *dwarf.Entry) bool {
	x, dec := w.x, w.dec
	cur := w.active[len(w.active)-1]
	next := cur
	prefix := w.scope[len(w.scope)-1]
	nextScope := prefix
	switch e.Tag {
	case dwarf.TagNamespace, dwarf.TagClassType, dwarf.TagStructType, dwarf.TagUnionType:
		n, _ := e.Val(dwarf.AttrName).(string)
		nextScope = scopeName(e.Tag, prefix, n)
	case dwarf.TagSubprogram, dwarf.TagInlinedSubroutine:
		ni := dieNameInfo(e, x.alt)
		if e.Tag == dwarf.TagSubprogram {
			if ni.name != "" {
				ni.name = prefix + ni.name
			}
			w.named = append(w.named, namedDIE{e.Offset, ni})
		}
		rs, err := w.ranges(e)
		if err != nil || len(rs) == 0 {
			if e.Tag == dwarf.TagSubprogram {
				next = -1 // abstract or declaration: nothing below has code
			}
			break
		}
		if len(rs) > maxRangesPerDIE {
			rs = rs[:maxRangesPerDIE]
		}
		node := fnNode{ranges: rs, entry: rs[0][0], parent: -1, callFile: -1}
		if lo, ok := e.Val(dwarf.AttrLowpc).(uint64); ok {
			node.entry = lo
		} else if ep, ok := e.Val(dwarf.AttrEntrypc).(uint64); ok {
			node.entry = ep
		}
		idx := int32(len(dec.nodes))
		if e.Tag == dwarf.TagInlinedSubroutine {
			if cur < 0 {
				break // inlined into nothing we know: skip
			}
			node.parent = cur
			if v, ok := e.Val(dwarf.AttrCallFile).(int64); ok {
				node.callFile = int32(v)
			}
			if v, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
				node.callLine = int32(v)
			}
			dec.nodes[cur].children = append(dec.nodes[cur].children, idx)
		} else {
			for _, rg := range rs {
				if rg[1] > rg[0] {
					dec.funcs = append(dec.funcs, fnRange{rg[0], rg[1], idx})
				}
			}
		}
		dec.nodes = append(dec.nodes, node)
		w.nodeInfo = append(w.nodeInfo, ni)
		next = idx
	}
	return w.push(e.Children, next, nextScope, e.Offset)
}

// ranges returns e's address ranges as d.Ranges does. For a DIE with
// DW_AT_ranges alone, d.Ranges reads the unit's DIE again for its base
// address (and DW_AT_addr_base) each time: an inlined call in C++ often
// has a range list, and that was a sixth of a unit's decoding. Here the
// unit's DIE, read once, stands in: a copy of its DW_AT_low_pc and
// DW_AT_addr_base beside e's DW_AT_ranges, on an entry with the unit's
// tag, which d.Ranges takes as its own base.
func (w *dieWalk) ranges(e *dwarf.Entry) ([][2]uint64, error) {
	rf := e.AttrField(dwarf.AttrRanges)
	if rf == nil || w.cu == nil || e.AttrField(dwarf.AttrLowpc) != nil || e.AttrField(dwarf.AttrHighpc) != nil {
		return w.d.Ranges(e)
	}
	s := &w.rangesEntry
	*s = dwarf.Entry{Offset: e.Offset, Tag: dwarf.TagCompileUnit, Field: append(s.Field[:0], *rf)}
	for _, a := range []dwarf.Attr{dwarf.AttrLowpc, dwarf.AttrAddrBase} {
		if f := w.cu.AttrField(a); f != nil {
			s.Field = append(s.Field, *f)
		}
	}
	return w.d.Ranges(s)
}

// scopeName is the prefix that qualifies names inside a scope DIE of tag
// named n, itself inside prefix.
func scopeName(tag dwarf.Tag, prefix, n string) string {
	if n == "" && tag == dwarf.TagNamespace {
		n = "(anonymous namespace)"
	}
	if n != "" && len(prefix) < 1024 {
		return prefix + n + "::"
	}
	return prefix
}

// lazyDIE is a subprogram without code the fast walk stepped over: its
// names are read only when a DIE refers to it.
type lazyDIE struct {
	off   dwarf.Offset
	scope int32 // the scope it is in, in dieWalk.scopes
}

// namedDIE is the names of a subprogram die took.
type namedDIE struct {
	off dwarf.Offset
	ni  nameInfo
}

// nameAt returns the names of the unit's subprogram at off: one the walk
// decoded, or one it stepped over (lazy), read now through the unit's
// view and kept.
func (w *dieWalk) nameAt(off dwarf.Offset) (nameInfo, bool) {
	if i, found := slices.BinarySearchFunc(w.named, off, func(n namedDIE, off dwarf.Offset) int {
		return cmp.Compare(n.off, off)
	}); found {
		return w.named[i].ni, true
	}
	if ni, ok := w.names[off]; ok {
		return ni, true
	}
	i, found := slices.BinarySearchFunc(w.lazy, off, func(l lazyDIE, off dwarf.Offset) int {
		return cmp.Compare(l.off, off)
	})
	if !found {
		return nameInfo{}, false
	}
	var ni nameInfo
	read := false
	if code, p, ok := uleb(w.b, int(off)); ok && w.abbrevs != nil {
		if a := w.abbrevs.get(code); a != nil && w.x.entry(&w.e, w.b, p, a, &w.h, off) {
			ni, read = dieNameInfo(&w.e, w.x.alt), true
		}
	}
	if !read {
		if ni, read = readNameInfo(w.d, off, w.x.alt); !read {
			return nameInfo{}, false
		}
	}
	if ni.name != "" {
		ni.name = w.scopes[w.lazy[i].scope] + ni.name
	}
	w.names[off] = ni
	return ni, true
}

// resolveName follows abstract_origin/specification references to the
// linkage name (preferred) or the plain name.
func (x *dwarfIndex) resolveName(ni nameInfo, names func(dwarf.Offset) (nameInfo, bool)) (name string, plain bool) {
	for hop := 0; ; hop++ {
		if ni.linkage != "" {
			return ni.linkage, false
		}
		if name == "" {
			name = ni.name
		}
		if ni.ref == 0 || hop >= maxOriginHops {
			return name, true
		}
		var next nameInfo
		ok := false
		if ni.refAlt {
			next, ok = readNameInfo(x.alt.d, ni.ref, nil)
			// References inside the dwz file are its own offsets.
			next.refAlt = next.ref != 0
		} else if next, ok = names(ni.ref); !ok {
			// Another unit's DIE (DW_FORM_ref_addr), through its view.
			if d, err := x.dataFor(ni.ref); err == nil {
				next, ok = readNameInfo(d, ni.ref, x.alt)
			}
		}
		if !ok {
			return name, true
		}
		ni = next
	}
}

// readNameInfo reads the DIE at off of d (another unit's, through
// DW_FORM_ref_addr, or the dwz file's).
func readNameInfo(d *dwarf.Data, off dwarf.Offset, alt *altDWARF) (nameInfo, bool) {
	if d == nil {
		return nameInfo{}, false
	}
	var ni nameInfo
	ok := false
	safely("dwarf reference", func() error {
		r := d.Reader()
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil || e.Offset != off {
			return err
		}
		ni, ok = dieNameInfo(e, alt), true
		return nil
	})
	return ni, ok
}

func (x *dwarfIndex) decodeLines(d *dwarf.Data, cu *dwarf.Entry, dec *cuDecoded, fileIdx map[*dwarf.LineFile]int32) error {
	lr, err := d.LineReader(cu)
	if err != nil || lr == nil {
		return err
	}
	files := lr.Files()
	dec.files = make([]string, len(files))
	for i, f := range files {
		if f != nil {
			dec.files[i] = f.Name
			fileIdx[f] = int32(i)
		}
	}
	if off, ok := cu.Val(dwarf.AttrStmtList).(int64); ok && off >= 0 {
		compDir, _ := cu.Val(dwarf.AttrCompDir).(string)
		if names, ok := lineFileNames(x.line, uint64(off), x.order, compDir, x.str, x.lineStr); ok {
			for i := range dec.files {
				if i < len(names) && names[i] != "" {
					dec.files[i] = names[i]
				}
			}
		}
	}
	var seqs [][]lineRow
	var seq []lineRow
	var le dwarf.LineEntry
	total := 0
	for total < maxLineRows {
		if total%ctxCheckEvery == 0 {
			if err := x.expired(); err != nil {
				return err
			}
		}
		if err := lr.Next(&le); err != nil {
			if err == io.EOF {
				break
			}
			return err
		}
		total++
		fi, ok := fileIdx[le.File]
		if !ok && le.File != nil {
			// A file defined by DW_LNE_define_file (DWARF < 5).
			fi = int32(len(dec.files))
			dec.files = append(dec.files, le.File.Name)
			fileIdx[le.File] = fi
		}
		row := lineRow{addr: le.Address, file: fi, line: int32(le.Line), end: le.EndSequence}
		// Of rows at one address, the last one counts (as in binutils).
		if n := len(seq); n > 0 && seq[n-1].addr == row.addr && seq[n-1].end == row.end {
			seq[n-1] = row
		} else {
			seq = append(seq, row)
		}
		if le.EndSequence {
			if len(seq) > 1 {
				seqs = append(seqs, seq)
			}
			seq = nil
		}
	}
	sort.SliceStable(seqs, func(i, j int) bool { return seqs[i][0].addr < seqs[j][0].addr })
	// Rows are searched by address, so they must be sorted: a sequence
	// that starts inside the one before it, or goes backwards, is left
	// out. The linker leaves the sequences of code it discarded at
	// address 0, where they overlap one another (libcephfs has dozens);
	// kept, they made the rows unsorted, the cached unit was refused on
	// every warm run, and the unit decoded again.
	kept := seqs[:0]
	for _, s := range seqs {
		if k := len(kept); k > 0 && s[0].addr < kept[k-1][len(kept[k-1])-1].addr || !rowsSorted(s) {
			continue
		}
		kept = append(kept, s)
	}
	seqs = kept
	n := 0
	for _, s := range seqs {
		n += len(s)
	}
	dec.rows = make([]lineRow, 0, n)
	for _, s := range seqs {
		dec.rows = append(dec.rows, s...)
	}
	dec.raddr = make([]uint64, len(dec.rows))
	for i, r := range dec.rows {
		dec.raddr[i] = r.addr
	}
	return nil
}

// rowsSorted reports whether a sequence's addresses never go backwards.
func rowsSorted(seq []lineRow) bool {
	for i := 1; i < len(seq); i++ {
		if seq[i].addr < seq[i-1].addr {
			return false
		}
	}
	return true
}

// lookupRow returns the line row covering pc.
func (dec *cuDecoded) lookupRow(pc uint64) (lineRow, bool) {
	rows := dec.rows
	i, found := slices.BinarySearch(dec.raddr, pc)
	if found {
		// The last row at pc (sequences may meet at one address).
		for i+1 < len(rows) && rows[i+1].addr == pc {
			i++
		}
	} else {
		i--
	}
	if i < 0 || rows[i].end {
		return lineRow{}, false
	}
	return rows[i], true
}

func (dec *cuDecoded) file(i int32) string {
	if i < 0 || int(i) >= len(dec.files) {
		return ""
	}
	return dec.files[i]
}

func (n *fnNode) contains(pc uint64) bool {
	for _, r := range n.ranges {
		if pc >= r[0] && pc < r[1] {
			return true
		}
	}
	return false
}

func (dec *cuDecoded) displayName(i int32, demangle bool) string {
	n := &dec.nodes[i]
	if !demangle || int(i) >= len(dec.dem) {
		return n.name
	}
	if p := dec.dem[i].Load(); p != nil {
		return *p
	}
	d := Demangle(n.name)
	dec.dem[i].Store(&d)
	return d
}

// findFunc returns the innermost function (not inlined) containing pc.
func (dec *cuDecoded) findFunc(pc uint64) int32 {
	fs := dec.funcs
	i := sort.Search(len(fs), func(i int) bool { return fs[i].lo > pc }) - 1
	for k := 0; i >= 0 && k < 16; i, k = i-1, k+1 {
		if pc < fs[i].hi {
			return fs[i].node
		}
	}
	return -1
}

// dwarfResult says how much DWARF knew about a pc.
type dwarfResult int

const (
	dwarfNone     dwarfResult = iota
	dwarfLineOnly             // a line but no function: the caller names it
	dwarfFull
)

// lookup appends the logical frames at pc, innermost first.
func (x *dwarfIndex) lookup(pc uint64, out []Sym, demangle bool) ([]Sym, dwarfResult) {
	cu := x.findCU(pc)
	if cu == nil {
		return out, dwarfNone
	}
	dec := x.unit(cu)
	row, haveRow := dec.lookupRow(pc)
	fn := dec.findFunc(pc)
	if fn < 0 {
		if !haveRow {
			return out, dwarfNone
		}
		return append(out, Sym{File: dec.file(row.file), Line: int(row.line)}), dwarfLineOnly
	}
	// Descend to the innermost inlined subroutine containing pc.
	chain := [64]int32{fn}
	depth := 1
	for node := fn; depth < len(chain); {
		nextNode := int32(-1)
		for _, c := range dec.nodes[node].children {
			if dec.nodes[c].contains(pc) {
				nextNode = c
				break
			}
		}
		if nextNode < 0 {
			break
		}
		chain[depth] = nextNode
		depth++
		node = nextNode
	}
	file, line := "", 0
	if haveRow {
		file, line = dec.file(row.file), int(row.line)
	}
	for i := depth - 1; i >= 0; i-- {
		n := &dec.nodes[chain[i]]
		s := Sym{File: file, Line: line, Inlined: i > 0}
		if i == 0 && n.plain && x.syms != nil {
			// A function without a linkage name (C, or C++ with internal
			// linkage): the symbol at its entry has the full name.
			if k, ok := x.syms.lookup(n.entry); ok && x.syms.addr[k] == n.entry {
				s.Function = x.syms.nameAt(k, demangle)
			}
		}
		if s.Function == "" {
			s.Function = dec.displayName(chain[i], demangle)
		}
		if i == 0 {
			if pc >= n.entry {
				s.Offset = pc - n.entry
			} else {
				for _, r := range n.ranges {
					if pc >= r[0] && pc < r[1] {
						s.Offset = pc - r[0]
					}
				}
			}
		}
		out = append(out, s)
		file, line = dec.file(n.callFile), int(n.callLine)
	}
	return out, dwarfFull
}

// attrMIPSLinkageName is DW_AT_MIPS_linkage_name (older GCC).
const attrMIPSLinkageName dwarf.Attr = 0x2007
