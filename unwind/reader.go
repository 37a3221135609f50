package unwind

import (
	"errors"
	"math"

	"stackshot/internal/bin"
)

// reader is the project's sticky-error decoder (bin.Reader, little endian)
// with the pointer encodings of .eh_frame.
type reader struct{ bin.Reader }

func newReader(b []byte, off int) reader { return reader{bin.Reader{B: b, Off: off}} }

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
	pos := r.Off
	if enc&0x70 == dwEhPeAligned {
		if a := (r.Off + 7) &^ 7; a <= len(r.B) {
			r.Off = a
		} else {
			r.Fail(bin.ErrShort)
			return 0
		}
		pos = r.Off
	}
	var v uint64
	switch enc & 0x0f {
	case dwEhPeAbsptr:
		v = r.U64()
	case dwEhPeUleb128:
		v = r.ULEB()
	case dwEhPeUdata2:
		v = uint64(r.U16())
	case dwEhPeUdata4:
		v = uint64(r.U32())
	case dwEhPeUdata8, dwEhPeSdata8:
		v = r.U64()
	case dwEhPeSleb128:
		v = uint64(r.SLEB())
	case dwEhPeSdata2:
		v = uint64(int64(int16(r.U16())))
	case dwEhPeSdata4:
		v = uint64(int64(int32(r.U32())))
	default:
		r.Fail(errEncoding)
		return 0
	}
	if !applyRel || r.Err() != nil {
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
		r.Fail(errEncoding)
		return 0
	}
	if enc&dwEhPeIndirect != 0 {
		if pb.deref == nil {
			r.Fail(errEncoding)
			return 0
		}
		p, ok := pb.deref(v)
		if !ok {
			r.Fail(errEncoding)
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
