package unwind

import (
	"encoding/binary"
	"errors"
	"math"
)

var errShort = errors.New("unexpected end of data")

// reader is a sticky-error little-endian decoder over a byte slice: after the
// first error every read returns zero, and the caller checks err once per
// record.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.off = len(r.b)
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > r.left() {
		r.fail(errShort)
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

func (r *reader) u8() uint8 {
	if r.err != nil || r.off >= len(r.b) {
		r.fail(errShort)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16() uint16 {
	b := r.bytes(2)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *reader) u32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *reader) u64() uint64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (r *reader) uleb() uint64 {
	var v uint64
	var shift uint
	for {
		c := r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) sleb() int64 {
	var v int64
	var shift uint
	var c uint8
	for {
		c = r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			break
		}
	}
	if shift < 64 && c&0x40 != 0 {
		v |= -1 << shift
	}
	return v
}

// cstring reads a NUL-terminated string.
func (r *reader) cstring() []byte {
	for i := r.off; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := r.b[r.off:i]
			r.off = i + 1
			return s
		}
	}
	r.fail(errShort)
	return nil
}

// Pointer encodings (DW_EH_PE_*), LSB Core specification.
const (
	dwEhPeAbsptr  = 0x00
	dwEhPeUleb128 = 0x01
	dwEhPeUdata2  = 0x02
	dwEhPeUdata4  = 0x03
	dwEhPeUdata8  = 0x04
	dwEhPeSleb128 = 0x09
	dwEhPeSdata2  = 0x0a
	dwEhPeSdata4  = 0x0b
	dwEhPeSdata8  = 0x0c
	dwEhPeSigned  = 0x08

	dwEhPePcrel   = 0x10
	dwEhPeTextrel = 0x20
	dwEhPeDatarel = 0x30
	dwEhPeFuncrel = 0x40
	dwEhPeAligned = 0x50

	dwEhPeIndirect = 0x80
	dwEhPeOmit     = 0xff
)

// ptrBases are the bases the relative pointer encodings add.
type ptrBases struct {
	section uint64 // virtual address of the reader's b[0] (pcrel)
	text    uint64 // textrel
	data    uint64 // datarel
	fn      uint64 // funcrel
	// deref reads an 8-byte pointer at a virtual address (indirect); may be nil.
	deref func(vaddr uint64) (uint64, bool)
}

var errEncoding = errors.New("bad pointer encoding")

// encoded reads a pointer with encoding enc. applyRel false reads the raw
// value format only (pc_range uses the format but no application).
func (r *reader) encoded(enc uint8, pb *ptrBases, applyRel bool) uint64 {
	if enc == dwEhPeOmit {
		return 0
	}
	pos := r.off
	if enc&0x70 == dwEhPeAligned {
		if a := (r.off + 7) &^ 7; a <= len(r.b) {
			r.off = a
		} else {
			r.fail(errShort)
			return 0
		}
		pos = r.off
	}
	var v uint64
	switch enc & 0x0f {
	case dwEhPeAbsptr:
		v = r.u64()
	case dwEhPeUleb128:
		v = r.uleb()
	case dwEhPeUdata2:
		v = uint64(r.u16())
	case dwEhPeUdata4:
		v = uint64(r.u32())
	case dwEhPeUdata8, dwEhPeSdata8:
		v = r.u64()
	case dwEhPeSleb128:
		v = uint64(r.sleb())
	case dwEhPeSdata2:
		v = uint64(int64(int16(r.u16())))
	case dwEhPeSdata4:
		v = uint64(int64(int32(r.u32())))
	default:
		r.fail(errEncoding)
		return 0
	}
	if !applyRel || r.err != nil {
		return v
	}
	switch enc & 0x70 {
	case dwEhPeAbsptr, dwEhPeAligned:
	case dwEhPePcrel:
		v += pb.section + uint64(pos)
	case dwEhPeTextrel:
		v += pb.text
	case dwEhPeDatarel:
		v += pb.data
	case dwEhPeFuncrel:
		v += pb.fn
	default:
		r.fail(errEncoding)
		return 0
	}
	if enc&dwEhPeIndirect != 0 {
		if pb.deref == nil {
			r.fail(errEncoding)
			return 0
		}
		p, ok := pb.deref(v)
		if !ok {
			r.fail(errEncoding)
			return 0
		}
		v = p
	}
	return v
}

// validEncoding reports whether enc is a pointer encoding this decoder knows.
func validEncoding(enc uint8) bool {
	if enc == dwEhPeOmit {
		return true
	}
	switch enc & 0x0f {
	case dwEhPeAbsptr, dwEhPeUleb128, dwEhPeUdata2, dwEhPeUdata4, dwEhPeUdata8,
		dwEhPeSleb128, dwEhPeSdata2, dwEhPeSdata4, dwEhPeSdata8:
	default:
		return false
	}
	return enc&0x70 <= dwEhPeAligned
}

func fitsInt32(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }
