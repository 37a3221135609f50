package safeelf

import (
	"context"
	"encoding/binary"
	"errors"
	"math/bits"
	"sync"
)

// A zlib (RFC 1950) / DEFLATE (RFC 1951) decoder for the one case a debug
// section is: the whole compressed stream in memory and the decompressed
// size known from the section's header. compress/flate decodes through a
// byte reader into a 32 KiB window copied out to the caller, and reads a
// Huffman code bit by bit past its fast table; a cold `-s -i` spent 75 % of
// its CPU there. Here codes are read from a 64-bit bit buffer refilled eight
// bytes at a time, through a two-level table, and matches are copied inside
// the output itself. The output is exactly len(dst) bytes (the section's
// declared size): the stream is decoded until dst is full and its checksum
// is not read (as reading the declared size through compress/zlib does).
// Every index is checked: a malformed stream is an error, never a panic or
// a read outside src; it cannot write past dst.

var errInflate = errors.New("corrupt deflate stream")

// Table entries: bits 0-3 the code's length (0: no such code), bit 4 a
// link to a second-level table (then bits 0-3 are that table's index
// bits), bits 8 and up the symbol or the second-level table's start.
const (
	entryLink    = 0x10
	litRootBits  = 10
	distRootBits = 8
	lenRootBits  = 7 // code-length codes are at most 7 bits
)

type huffTable struct {
	t    []uint32
	root uint
}

// build makes the decoding table of the canonical code of lengths (each
// at most 15). As compress/flate does, a code must be complete, except a
// single code of length 1; no code at all gives an empty table (a block
// with literals only has no distance code).
func (h *huffTable) build(lengths []uint8, root uint) error {
	var count [16]int
	maxLen, n := 0, 0
	for _, l := range lengths {
		if l > 15 {
			return errInflate
		}
		if l > 0 {
			count[l]++
			n++
			maxLen = max(maxLen, int(l))
		}
	}
	h.root = root
	size := 1 << root
	if cap(h.t) < size {
		h.t = make([]uint32, size, size*2)
	}
	h.t = h.t[:size]
	clear(h.t)
	if n == 0 {
		return nil
	}
	left := 1
	for l := 1; l <= 15; l++ {
		left = left<<1 - count[l]
		if left < 0 {
			return errInflate
		}
	}
	if left > 0 && !(n == 1 && maxLen == 1) {
		return errInflate
	}
	var next [16]uint32
	code := uint32(0)
	for l := 1; l <= 15; l++ {
		code = (code + uint32(count[l-1])) << 1
		next[l] = code
	}
	next[0] = 0
	// Second-level tables: one per root prefix of the long codes, as wide
	// as its longest code needs.
	rootMask := uint32(size - 1)
	if maxLen > int(root) {
		var subMax [1 << litRootBits]uint8
		c := next
		for _, l := range lengths {
			if int(l) > int(root) {
				rev := bits.Reverse16(uint16(c[l])) >> (16 - l)
				c[l]++
				p := uint32(rev) & rootMask
				subMax[p] = max(subMax[p], l)
			}
		}
		for p := 0; p < size; p++ {
			if subMax[p] == 0 {
				continue
			}
			sb := uint32(subMax[p]) - uint32(root)
			h.t[p] = uint32(len(h.t))<<8 | entryLink | sb
			h.t = append(h.t, make([]uint32, 1<<sb)...)
		}
	}
	for sym, l := range lengths {
		if l == 0 {
			continue
		}
		rev := uint32(bits.Reverse16(uint16(next[l])) >> (16 - l))
		next[l]++
		if uint(l) <= root {
			for i := rev; i < uint32(size); i += 1 << l {
				h.t[i] = uint32(sym)<<8 | uint32(l)
			}
			continue
		}
		link := h.t[rev&rootMask]
		base, sb := link>>8, link&0xf
		sl := uint32(l) - uint32(root)
		for i := rev >> root; i < 1<<sb; i += 1 << sl {
			h.t[base+i] = uint32(sym)<<8 | sl
		}
	}
	return nil
}

var (
	fixedOnce         sync.Once
	fixedLit, fixedDs huffTable
)

func fixedTables() (*huffTable, *huffTable) {
	fixedOnce.Do(func() {
		var l [288]uint8
		for i := range l {
			switch {
			case i < 144:
				l[i] = 8
			case i < 256:
				l[i] = 9
			case i < 280:
				l[i] = 7
			default:
				l[i] = 8
			}
		}
		_ = fixedLit.build(l[:], litRootBits)
		// All 32 codes, so that 30 and 31 decode (and are refused as
		// distances) rather than make the code incomplete.
		var d [32]uint8
		for i := range d {
			d[i] = 5
		}
		_ = fixedDs.build(d[:], distRootBits)
	})
	return &fixedLit, &fixedDs
}

var (
	lenBase  = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lenExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	dstBase  = [30]uint32{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	dstExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	clOrder  = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

// inflater is the decoder's state: the bit buffer over src and the
// output position in dst.
type inflater struct {
	src   []byte
	pos   int    // next byte of src to load
	bits  uint64 // bits not yet consumed, first in the low bits
	nbits uint   // how many of them are valid
	pad   uint   // zero bytes loaded past the end of src
	dst   []byte
	out   int
	lit   huffTable
	dist  huffTable
	cl    huffTable

	progress func([]byte, int) // see inflateZlibProgress
	reported int               // out at its last call
}

// refill makes at least 56 bits valid. Past the end of src it loads zero
// bytes, counted in pad: using one of them is the truncated stream error
// (see overrun).
func (f *inflater) refill() {
	if f.pos+8 <= len(f.src) {
		f.bits |= binary.LittleEndian.Uint64(f.src[f.pos:]) << f.nbits
		f.pos += int((63 - f.nbits) >> 3)
		f.nbits |= 56
		return
	}
	for f.nbits <= 56 {
		if f.pos < len(f.src) {
			f.bits |= uint64(f.src[f.pos]) << f.nbits
			f.pos++
		} else {
			f.pad++
		}
		f.nbits += 8
	}
}

// overrun reports whether bits past the end of src were consumed.
func (f *inflater) overrun() bool { return f.pad > 0 && f.nbits < 8*f.pad }

func (f *inflater) take(n uint) uint32 {
	v := uint32(f.bits & (1<<n - 1))
	f.bits >>= n
	f.nbits -= n
	return v
}

// sym decodes one symbol of h (at least 15 valid bits).
func (f *inflater) sym(h *huffTable) (uint32, bool) {
	e := h.t[f.bits&(1<<h.root-1)]
	if e&entryLink != 0 {
		f.bits >>= h.root
		f.nbits -= h.root
		i := e>>8 + uint32(f.bits&(1<<(e&0xf)-1))
		if int(i) >= len(h.t) {
			return 0, false
		}
		e = h.t[i]
	}
	n := uint(e & 0xf)
	if n == 0 || e&entryLink != 0 {
		return 0, false
	}
	f.bits >>= n
	f.nbits -= n
	return e >> 8, true
}

// inflateZlib decodes the zlib stream src into all of dst; ctx (nil:
// never cancelled) is checked between blocks.
func inflateZlib(ctx context.Context, dst, src []byte) error {
	return inflateZlibProgress(ctx, dst, src, nil)
}

// progressStep is how much output is decoded between two calls of an
// inflater's progress.
const progressStep = 1 << 20

// inflateZlibProgress is inflateZlib calling progress (when not nil)
// between blocks, after each progressStep bytes of output or so, with
// dst and how many of its first bytes are final (a match's copy may
// write a few bytes past its end, never before).
func inflateZlibProgress(ctx context.Context, dst, src []byte, progress func([]byte, int)) error {
	if len(src) < 2 || src[0]&0x0f != 8 || src[0]>>4 > 7 || (uint(src[0])<<8|uint(src[1]))%31 != 0 || src[1]&0x20 != 0 {
		return errInflate
	}
	f := &inflater{src: src, pos: 2, dst: dst, progress: progress}
	return f.run(ctx)
}

func (f *inflater) run(ctx context.Context) error {
	for f.out < len(f.dst) {
		if ctx != nil {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		f.refill()
		final := f.take(1)
		switch f.take(2) {
		case 0:
			if err := f.stored(); err != nil {
				return err
			}
		case 1:
			lit, dist := fixedTables()
			if err := f.codes(lit, dist); err != nil {
				return err
			}
		case 2:
			if err := f.dynamic(); err != nil {
				return err
			}
			if err := f.codes(&f.lit, &f.dist); err != nil {
				return err
			}
		default:
			return errInflate
		}
		if f.overrun() {
			return errInflate
		}
		if final == 1 && f.out < len(f.dst) {
			return errInflate // the stream ends short of the declared size
		}
		if f.progress != nil && f.out-f.reported >= progressStep && f.out < len(f.dst) {
			f.reported = f.out
			f.progress(f.dst, f.out)
		}
	}
	return nil
}

func (f *inflater) stored() error {
	f.take(f.nbits & 7)
	// Give back the whole bytes still buffered: the block is copied from src.
	buffered := f.nbits / 8
	if f.pad > buffered {
		return errInflate
	}
	f.pos -= int(buffered - f.pad)
	f.bits, f.nbits, f.pad = 0, 0, 0
	if f.pos+4 > len(f.src) {
		return errInflate
	}
	n := int(binary.LittleEndian.Uint16(f.src[f.pos:]))
	if binary.LittleEndian.Uint16(f.src[f.pos+2:]) != ^uint16(n) {
		return errInflate
	}
	f.pos += 4
	k := min(n, len(f.dst)-f.out)
	if k > len(f.src)-f.pos {
		return errInflate
	}
	copy(f.dst[f.out:], f.src[f.pos:f.pos+k])
	f.out += k
	f.pos += k
	return nil
}

func (f *inflater) dynamic() error {
	f.refill()
	nlit := int(f.take(5)) + 257
	ndist := int(f.take(5)) + 1
	ncl := int(f.take(4)) + 4
	if nlit > 286 || ndist > 30 {
		return errInflate
	}
	var cl [19]uint8
	for i := 0; i < ncl; i++ {
		if i%16 == 0 {
			f.refill()
		}
		cl[clOrder[i]] = uint8(f.take(3))
	}
	if err := f.cl.build(cl[:], lenRootBits); err != nil {
		return err
	}
	var lens [286 + 30]uint8
	for i := 0; i < nlit+ndist; {
		f.refill()
		s, ok := f.sym(&f.cl)
		if !ok {
			return errInflate
		}
		if s < 16 {
			lens[i] = uint8(s)
			i++
			continue
		}
		var rep int
		var v uint8
		switch s {
		case 16:
			if i == 0 {
				return errInflate
			}
			v, rep = lens[i-1], 3+int(f.take(2))
		case 17:
			rep = 3 + int(f.take(3))
		default:
			rep = 11 + int(f.take(7))
		}
		if i+rep > nlit+ndist {
			return errInflate
		}
		for ; rep > 0; rep-- {
			lens[i] = v
			i++
		}
	}
	if f.overrun() {
		return errInflate
	}
	if err := f.lit.build(lens[:nlit], litRootBits); err != nil {
		return err
	}
	return f.dist.build(lens[nlit:nlit+ndist], distRootBits)
}

// codes decodes a Huffman-coded block until its end or until dst is full
// (f.out < len(f.dst) on entry). The loop keeps the decoder's state in
// locals (written back on return) and inlines refill and sym: it is where
// a cold run spends most of its decompression.
func (f *inflater) codes(lit, dist *huffTable) (err error) {
	dst, src := f.dst, f.src
	out, pos, bitbuf, nbits := f.out, f.pos, f.bits, f.nbits
	lt, dt := lit.t, dist.t
	lroot, droot, ok := roots(lit, dist)
	if !ok {
		return errInflate // (never: build makes them so)
	}
	defer func() { f.out, f.pos, f.bits, f.nbits = out, pos, bitbuf, nbits }()
	for {
		if pos+8 <= len(src) {
			bitbuf |= binary.LittleEndian.Uint64(src[pos:]) << nbits
			pos += int((63 - nbits) >> 3)
			nbits |= 56
		} else {
			f.pos, f.bits, f.nbits = pos, bitbuf, nbits
			f.refill()
			pos, bitbuf, nbits = f.pos, f.bits, f.nbits
			if f.overrun() {
				return errInflate
			}
		}
		e := lroot[bitbuf&(1<<litRootBits-1)]
		if e&entryLink != 0 {
			bitbuf >>= litRootBits
			nbits -= litRootBits
			e = second(lt, e, bitbuf)
		}
		n := uint(e & 0xf)
		if n == 0 || e&entryLink != 0 {
			return errInflate
		}
		bitbuf >>= n
		nbits -= n
		s := e >> 8
		if s < 256 {
			dst[out] = byte(s)
			out++
			if out == len(dst) {
				return nil // the next symbol's bits may not be there
			}
			// At least 41 bits are left: a second literal of a root
			// entry needs no refill.
			if e = lroot[bitbuf&(1<<litRootBits-1)]; e&entryLink == 0 && e>>8 < 256 && e&0xf != 0 {
				n = uint(e & 0xf)
				bitbuf >>= n
				nbits -= n
				dst[out] = byte(e >> 8)
				out++
				if out == len(dst) {
					return nil
				}
			}
			continue
		}
		if s == 256 {
			return nil
		}
		s -= 257
		if s >= 29 {
			return errInflate
		}
		xb := uint(lenExtra[s])
		length := int(lenBase[s]) + int(bitbuf&(1<<xb-1))
		bitbuf >>= xb
		nbits -= xb
		if droot == nil {
			return errInflate
		}
		e = droot[bitbuf&(1<<distRootBits-1)]
		if e&entryLink != 0 {
			bitbuf >>= distRootBits
			nbits -= distRootBits
			e = second(dt, e, bitbuf)
		}
		n = uint(e & 0xf)
		if n == 0 || e&entryLink != 0 {
			return errInflate
		}
		bitbuf >>= n
		nbits -= n
		ds := e >> 8
		if ds >= 30 {
			return errInflate
		}
		xb = uint(dstExtra[ds])
		d := int(dstBase[ds]) + int(bitbuf&(1<<xb-1))
		bitbuf >>= xb
		nbits -= xb
		if f.pad > 0 && nbits < 8*f.pad || d > out {
			return errInflate
		}
		out = copyMatch(dst, out, d, length)
		if out >= len(dst) {
			return nil
		}
	}
}

// roots returns the root tables of lit and dist (nil: no distance code)
// as arrays: indexes masked to their size need no bounds check.
func roots(lit, dist *huffTable) (*[1 << litRootBits]uint32, *[1 << distRootBits]uint32, bool) {
	lt, dt := lit.t, dist.t
	if len(lt) < 1<<litRootBits || lit.root != litRootBits || len(dt) > 0 && (len(dt) < 1<<distRootBits || dist.root != distRootBits) {
		return nil, nil, false
	}
	var droot *[1 << distRootBits]uint32
	if len(dt) > 0 {
		droot = (*[1 << distRootBits]uint32)(dt)
	}
	return (*[1 << litRootBits]uint32)(lt), droot, true
}

// copyMatch copies length bytes from d bytes back (d <= out) to dst[out:],
// cut at the end of dst, and returns the new end.
func copyMatch(dst []byte, out, d, length int) int {
	length = min(length, len(dst)-out)
	from := out - d
	switch {
	case d >= 8 && out+length+8 <= len(dst):
		// Eight bytes at a time; the last word may write past the
		// match, into bytes decoded next.
		for i := 0; i < length; i += 8 {
			binary.LittleEndian.PutUint64(dst[out+i:], binary.LittleEndian.Uint64(dst[from+i:]))
		}
	case d == 1 && out+length+8 <= len(dst):
		// A run of one byte (zeros, in DWARF), eight at a time.
		v := uint64(dst[from]) * 0x0101010101010101
		for i := 0; i < length; i += 8 {
			binary.LittleEndian.PutUint64(dst[out+i:], v)
		}
	case d >= length:
		copy(dst[out:out+length], dst[from:])
	default:
		for i := 0; i < length; i++ {
			dst[out+i] = dst[from+i]
		}
	}
	return out + length
}

// second returns the entry of the second-level table that the root entry
// e links to, for the bits b after the root's (0, no code, past the table).
func second(t []uint32, e uint32, b uint64) uint32 {
	i := e>>8 + uint32(b&(1<<(e&0xf)-1))
	if int(i) >= len(t) {
		return 0
	}
	return t[i]
}
