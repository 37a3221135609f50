package symtab

import (
	"bytes"
	"debug/dwarf"
	"slices"
	"sort"
	"sync"
)

// Units decoded while .debug_info is still being decompressed.
//
// On a cold run of a large compressed debug file the decompression of
// .debug_info is most of the first phase, on one core (libcephfs: 150 ms
// for 30 MB), and no unit was decoded before it was whole; the other core
// read the smaller sections in 60 ms, then waited. Now that core goes on
// to decode, as soon as its bytes are out, each unit that .debug_aranges
// says holds one of the first addresses asked (Module.Prefetch), into a
// private buffer holding the unit's bytes at their section offsets, a
// dummy header before them (as dataFor makes a view of one unit), and
// nothing else: it never touches the section being filled. The lookups
// take such a unit only when its header and bytes are those of the whole
// section (checked then): the same bytes give the same decoding.

// earlyMinReady is how much of the section must be out before the first
// early decode (a margin past the 32 KB a zlib match reaches back).
const earlyMinReady = 64 << 10

// earlyUnits is what the early decoder shares with the decompression and
// the lookups.
type earlyUnits struct {
	mu    sync.Mutex
	cond  *sync.Cond
	buf   []byte // the section being filled
	ready int    // its first ready bytes are final
	over  bool   // the decompression ended (or gave up): stop
	units map[dwarf.Offset]*earlyUnit

	finished chan struct{} // closed when the early decoder returns
}

// earlyUnit is a unit decoded early (dec, once done is closed).
type earlyUnit struct {
	h    unitHeader
	info []byte // the unit's bytes, a copy
	dec  *cuDecoded
	done chan struct{}
}

func newEarlyUnits() *earlyUnits {
	e := &earlyUnits{units: map[dwarf.Offset]*earlyUnit{}, finished: make(chan struct{})}
	e.cond = sync.NewCond(&e.mu)
	return e
}

// progress is the decompression's: n bytes of buf are final.
func (e *earlyUnits) progress(buf []byte, n int) {
	e.mu.Lock()
	e.buf, e.ready = buf, n
	e.mu.Unlock()
	e.cond.Broadcast()
}

// earlyWaitForTests makes end hand the early decoder the whole section
// and wait for it to finish its units: tests then know which units it
// decoded, whatever the timing.
var earlyWaitForTests bool

// end is the end of the decompression (info the section, nil if it
// failed): the early decoder stops after the unit it decodes.
func (e *earlyUnits) end(info []byte) {
	if earlyWaitForTests && info != nil {
		e.progress(info, len(info))
		<-e.finished
	}
	e.stop()
}

// stop stops the early decoder after the unit it decodes.
func (e *earlyUnits) stop() {
	e.mu.Lock()
	e.over = true
	e.mu.Unlock()
	e.cond.Broadcast()
}

// wait returns the section's final bytes once there are at least n (or
// all of them, fewer), nil when it will not be.
func (e *earlyUnits) wait(n uint64) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	whole := func() bool { return e.buf != nil && e.ready == len(e.buf) }
	for !e.over && uint64(e.ready) < n && !whole() {
		e.cond.Wait()
	}
	if e.over || e.buf == nil || uint64(e.ready) < n && !whole() {
		return nil
	}
	return e.buf[:e.ready] // (its capacity the section's size)
}

// unitsFor returns the unit header offsets that aranges gives for pcs,
// in increasing order, at most 256: each pc's unit is found as findCU
// finds it (a binary search; a scan of every range for each pc cost
// pcs × ranges, and both are the target's to make large).
func unitsFor(aranges []byte, x *dwarfIndex, pcs []uint64) []uint64 {
	var rs []cuRange
	var units []uint64 // by rs[i].cu
	_ = parseAranges(aranges, x.order, func(unit, lo, hi uint64) {
		if len(rs) < maxUnits {
			rs = append(rs, cuRange{lo, hi, int32(len(units))})
			units = append(units, unit)
		}
	})
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	seen := map[uint64]bool{}
	var out []uint64
	for _, pc := range pcs {
		if i := rangeAt(rs, pc); i >= 0 && !seen[units[rs[i].cu]] {
			seen[units[rs[i].cu]] = true
			out = append(out, units[rs[i].cu])
			if len(out) >= 256 {
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// run decodes early the units at the header offsets offs, through a view
// made like x (its other sections), until the decompression ends.
func (e *earlyUnits) run(x *dwarfIndex, get map[string][]byte, offs []uint64) {
	prefix := e.wait(earlyMinReady)
	if prefix == nil {
		return
	}
	total := uint64(cap(prefix)) // the section's size
	for _, off := range offs {
		if off >= total || total-off < 12 || off > 0 && (off < dummyUnitBytes || off-4 >= 0xfffffff0) {
			continue
		}
		if prefix = e.wait(off + 12); prefix == nil {
			return
		}
		// The unit's length, then its bytes.
		l, hdr := uint64(x.order.Uint32(prefix[off:])), uint64(4)
		if l == 0xffffffff {
			l, hdr = x.order.Uint64(prefix[off+4:]), 12
		}
		if l > total-off-hdr {
			continue
		}
		end := off + hdr + l
		if prefix = e.wait(end); prefix == nil {
			return
		}
		hs, _ := parseUnitHeaders(prefix[off:end], x.order)
		if len(hs) != 1 || !hs[0].isCU {
			continue
		}
		h := hs[0]
		h.off, h.die, h.end = h.off+off, h.die+off, h.end+off
		if !e.decode(x, get, h, prefix) {
			return
		}
	}
}

// decode decodes the unit h (whose bytes are in prefix) as x.unit would;
// false when it cannot be done early at all.
func (e *earlyUnits) decode(x *dwarfIndex, get map[string][]byte, h unitHeader, prefix []byte) bool {
	ux := &dwarfIndex{order: x.order, alt: x.alt, ctx: x.ctx, slowWalk: x.slowWalk}
	view := map[string][]byte{}
	for k, v := range get {
		view[k] = v
	}
	view["info"] = prefix // (for the byte order of its first unit)
	if ux.setSections(view) != nil || ux.emptyAbbrev < 0 {
		return false // dataFor would use a view of every unit
	}
	buf, free := sparseBuffer(int(h.end))
	if buf == nil {
		return false
	}
	defer free()
	copy(buf[h.off:h.end], prefix[h.off:h.end])
	ux.info = buf
	ux.headersOnce.Do(func() { ux.headers = []unitHeader{h} })
	eu := &earlyUnit{h: h, info: bytes.Clone(prefix[h.off:h.end]), done: make(chan struct{})}
	e.mu.Lock()
	if e.units[dwarf.Offset(h.die)] != nil {
		e.mu.Unlock()
		return true
	}
	e.units[dwarf.Offset(h.die)] = eu
	e.mu.Unlock()
	defer close(eu.done)
	dec := &cuDecoded{}
	if err := safely("dwarf unit", func() error { return ux.decode(dwarf.Offset(h.die), dec) }); err != nil {
		dec.err = err
	}
	eu.dec = dec
	return true
}

// take returns the unit whose DIE is at off as decoded early, if it was
// and the whole section (x.info, its headers) has the same header and
// bytes, after waiting for its decoding to end.
func (e *earlyUnits) take(x *dwarfIndex, off dwarf.Offset) (*cuDecoded, bool) {
	if e == nil {
		return nil, false
	}
	e.mu.Lock()
	eu := e.units[off]
	e.mu.Unlock()
	if eu == nil {
		return nil, false
	}
	<-eu.done
	h, ok := x.unitHeaderAt(uint64(off))
	same := ok && h == eu.h && eu.dec != nil && h.end <= uint64(len(x.info)) && bytes.Equal(x.info[h.off:h.end], eu.info)
	eu.info = nil
	if !same {
		return nil, false
	}
	return eu.dec, true
}
