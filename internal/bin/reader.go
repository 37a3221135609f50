package bin

import (
	"bytes"
	"encoding/binary"
	"errors"
)

// ErrShort is the error of a read past the end of a Reader's data.
var ErrShort = errors.New("unexpected end of data")

// ErrLEB is the error of an over-long LEB128 number.
var ErrLEB = errors.New("leb128 number too long")

// Reader is a sticky-error decoder over a byte slice (debug/dwarf's buf):
// after the first error every read returns zero and Err reports it, so a
// caller checks once per record. Multi-byte values use Order (little
// endian when nil).
type Reader struct {
	B     []byte
	Off   int
	Order binary.ByteOrder
	err   error
}

// NewReader returns a Reader over b.
func NewReader(b []byte, order binary.ByteOrder) *Reader {
	return &Reader{B: b, Order: order}
}

// Err is the first error met, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err (if no error is recorded yet) and consumes the rest.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.Off = len(r.B)
}

// Left is the number of bytes not yet read.
func (r *Reader) Left() int { return len(r.B) - r.Off }

// Rest returns the unread bytes (nil after an error).
func (r *Reader) Rest() []byte {
	if r.err != nil {
		return nil
	}
	return r.B[r.Off:]
}

func (r *Reader) order() binary.ByteOrder {
	if r.Order == nil {
		return binary.LittleEndian
	}
	return r.Order
}

// Bytes returns the next n bytes (a sub-slice, not a copy).
func (r *Reader) Bytes(n uint64) []byte {
	if r.err != nil || n > uint64(r.Left()) {
		r.Fail(ErrShort)
		return nil
	}
	b := r.B[r.Off : r.Off+int(n)]
	r.Off += int(n)
	return b
}

// U8 reads one byte.
func (r *Reader) U8() uint8 {
	if r.err != nil || r.Off >= len(r.B) {
		r.Fail(ErrShort)
		return 0
	}
	v := r.B[r.Off]
	r.Off++
	return v
}

// U16 reads a 16-bit value.
func (r *Reader) U16() uint16 {
	if b := r.Bytes(2); b != nil {
		return r.order().Uint16(b)
	}
	return 0
}

// U32 reads a 32-bit value.
func (r *Reader) U32() uint32 {
	if b := r.Bytes(4); b != nil {
		return r.order().Uint32(b)
	}
	return 0
}

// U64 reads a 64-bit value.
func (r *Reader) U64() uint64 {
	if b := r.Bytes(8); b != nil {
		return r.order().Uint64(b)
	}
	return 0
}

// maxLEBBytes bounds an LEB128 number: 10 bytes hold 64 bits; some
// producers pad, so a few more are accepted, not an unbounded run.
const maxLEBBytes = 16

// ULEB reads an unsigned LEB128 number (bits past 64 are dropped).
func (r *Reader) ULEB() uint64 {
	var v uint64
	for i, shift := 0, uint(0); ; i, shift = i+1, shift+7 {
		if i == maxLEBBytes {
			r.Fail(ErrLEB)
			return 0
		}
		c := r.U8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v
		}
	}
}

// SLEB reads a signed LEB128 number.
func (r *Reader) SLEB() int64 {
	var v int64
	var shift uint
	var c uint8
	for i := 0; ; i++ {
		if i == maxLEBBytes {
			r.Fail(ErrLEB)
			return 0
		}
		c = r.U8()
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

// CString reads a NUL-terminated string (without the NUL; a sub-slice).
func (r *Reader) CString() []byte {
	if r.err != nil {
		return nil
	}
	i := bytes.IndexByte(r.B[r.Off:], 0)
	if i < 0 {
		r.Fail(ErrShort)
		return nil
	}
	s := r.B[r.Off : r.Off+i]
	r.Off += i + 1
	return s
}

// CStringAt returns the NUL-terminated string at off in sec ("" when off
// is out of range or the string is unterminated).
func CStringAt(sec []byte, off uint64) string {
	s, _ := CString(sec, off)
	return s
}

// CString is the NUL-terminated string at off in sec, and whether there
// is one (off inside sec, a NUL after it).
func CString(sec []byte, off uint64) (string, bool) {
	if off >= uint64(len(sec)) {
		return "", false
	}
	s := sec[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return string(s[:i]), true
	}
	return "", false
}
