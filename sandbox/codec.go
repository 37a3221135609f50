//go:build linux

package sandbox

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
)

// The frames between parent and child are encoded by a codec of the
// package's own. Both ends are the same binary, so a frame need not
// describe its types, as gob's do: gob's package initialiser cost every run of stackshot 0.13 ms, and
// its first encoding and decoding, compiling its engines for every type
// of downMsg, 0.25 ms in the parent and 0.14 ms in the child. A value is
// encoded depth first:
//
//	bool         one byte, 0 or 1
//	intN         zigzag varint; uintN varint; floatN 8 bytes
//	string       varint length, bytes
//	slice, map   0 for nil, else 1 + its length, then its elements (a
//	             map's as key, value)
//	array        its elements
//	pointer      0 for nil, else 1, then what it points to
//	struct       its exported fields in order; a []byte of its
//	             MarshalBinary when it has one (time.Time)
//
// Unlike gob's, an empty slice stays empty and a pointer to a zero value
// stays a pointer: each end sees what the other had, strings byte for
// byte (JSON would turn invalid UTF-8 into U+FFFD).
//
// The child's frames up are encoded the same way, and a compromised child
// writes what it likes: a frame is decoded within the frame (a length past
// what is left of it is an error, never an allocation), and what decoding
// allocates is bounded before it is allocated (decoder.left), allocRatio
// times the frame's size at most: a short frame cannot claim millions of
// elements of a large type.

var errCodec = errors.New("malformed frame")

// maxCodecDepth bounds the nesting of a decoded value.
const maxCodecDepth = 32

var (
	binaryMarshaler   = reflect.TypeFor[encoding.BinaryMarshaler]()
	binaryUnmarshaler = reflect.TypeFor[encoding.BinaryUnmarshaler]()
)

// structCodec is how a struct type is encoded: by MarshalBinary, or by
// its exported fields.
type structCodec struct {
	marshals bool
	fields   []int
}

var structCodecs sync.Map // reflect.Type -> *structCodec

func codecOf(t reflect.Type) *structCodec {
	if c, ok := structCodecs.Load(t); ok {
		return c.(*structCodec)
	}
	c := &structCodec{marshals: t.Implements(binaryMarshaler) && reflect.PointerTo(t).Implements(binaryUnmarshaler)}
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() {
			c.fields = append(c.fields, i)
		}
	}
	structCodecs.Store(t, c)
	return c
}

// appendValue appends v's encoding to b.
func appendValue(b []byte, v reflect.Value) []byte {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return binary.AppendUvarint(b, v.Uint())
	case reflect.Float32, reflect.Float64:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float()))
	case reflect.String:
		b = binary.AppendUvarint(b, uint64(v.Len()))
		return append(b, v.String()...)
	case reflect.Slice:
		if v.IsNil() {
			return append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(v.Len())+1)
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return append(b, v.Bytes()...)
		}
		for i := 0; i < v.Len(); i++ {
			b = appendValue(b, v.Index(i))
		}
		return b
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			b = appendValue(b, v.Index(i))
		}
		return b
	case reflect.Map:
		if v.IsNil() {
			return append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(v.Len())+1)
		it := v.MapRange()
		for it.Next() {
			b = appendValue(b, it.Key())
			b = appendValue(b, it.Value())
		}
		return b
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, 0)
		}
		return appendValue(append(b, 1), v.Elem())
	case reflect.Struct:
		c := codecOf(v.Type())
		if c.marshals {
			data, err := v.Interface().(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				// (time.Time's, for a zone offset out of range: not a
				// time any capture holds.)
				panic(fmt.Sprintf("sandbox codec: %v", err))
			}
			b = binary.AppendUvarint(b, uint64(len(data)))
			return append(b, data...)
		}
		for _, i := range c.fields {
			b = appendValue(b, v.Field(i))
		}
		return b
	}
	panic("sandbox codec: cannot encode a " + v.Type().String())
}

// decoder reads what appendValue wrote.
type decoder struct {
	b    []byte
	left int64 // bytes decoding may still allocate
}

// allocRatio bounds what decoding a frame allocates, as a multiple of its
// size (plus allocSlack). By construction the densest values the answers
// hold decode to 16 times their encoding: an empty string, one byte, is a
// 16-byte header; an int or a pointer, one byte, 8 bytes.
const (
	allocRatio = 32
	allocSlack = 1 << 20
)

// charge takes n bytes from what decoding may still allocate.
func (d *decoder) charge(n uint64) error {
	if n > uint64(d.left) {
		return errCodec
	}
	d.left -= int64(n)
	return nil
}

// chargeN charges n values of t (a byte at least each).
func (d *decoder) chargeN(n int, t reflect.Type) error {
	size := max(uint64(t.Size()), 1)
	if n > 0 && size > uint64(d.left)/uint64(n) {
		return errCodec
	}
	return d.charge(uint64(n) * size)
}

func (d *decoder) uvarint() (uint64, error) {
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, errCodec
	}
	d.b = d.b[n:]
	return x, nil
}

// bytes reads a length, then that many bytes (a view of the frame).
func (d *decoder) bytes() ([]byte, error) {
	n, err := d.uvarint()
	if err != nil || n > uint64(len(d.b)) {
		return nil, errCodec
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out, nil
}

// length reads a slice's or a map's prefix: -1 for nil. Each element
// takes a byte at least (the types sent have none that encodes to
// nothing), so a length past what is left of the frame is an error.
func (d *decoder) length() (int, error) {
	n, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return -1, nil
	}
	if n--; n > uint64(len(d.b)) {
		return 0, errCodec
	}
	return int(n), nil
}

// flag reads a bool's or a pointer's byte.
func (d *decoder) flag() (bool, error) {
	if len(d.b) < 1 || d.b[0] > 1 {
		return false, errCodec
	}
	f := d.b[0] == 1
	d.b = d.b[1:]
	return f, nil
}

// decodeValue decodes into v, which is settable.
func (d *decoder) decodeValue(v reflect.Value, depth int) error {
	if depth > maxCodecDepth {
		return errCodec
	}
	switch v.Kind() {
	case reflect.Bool:
		f, err := d.flag()
		if err != nil {
			return err
		}
		v.SetBool(f)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, n := binary.Varint(d.b)
		if n <= 0 || v.OverflowInt(x) {
			return errCodec
		}
		v.SetInt(x)
		d.b = d.b[n:]
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		x, err := d.uvarint()
		if err != nil || v.OverflowUint(x) {
			return errCodec
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		if len(d.b) < 8 {
			return errCodec
		}
		v.SetFloat(math.Float64frombits(binary.LittleEndian.Uint64(d.b)))
		d.b = d.b[8:]
	case reflect.String:
		s, err := d.bytes()
		if err == nil {
			err = d.charge(uint64(len(s)))
		}
		if err != nil {
			return err
		}
		v.SetString(string(s))
	case reflect.Slice:
		return d.decodeSlice(v, depth)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := d.decodeValue(v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		return d.decodeMap(v, depth)
	case reflect.Pointer:
		nonNil, err := d.flag()
		if err != nil || !nonNil {
			return err
		}
		if err := d.chargeN(1, v.Type().Elem()); err != nil {
			return err
		}
		p := reflect.New(v.Type().Elem())
		if err := d.decodeValue(p.Elem(), depth+1); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Struct:
		c := codecOf(v.Type())
		if c.marshals {
			data, err := d.bytes()
			if err != nil {
				return err
			}
			if v.Addr().Interface().(encoding.BinaryUnmarshaler).UnmarshalBinary(data) != nil {
				return errCodec
			}
			return nil
		}
		for _, i := range c.fields {
			if err := d.decodeValue(v.Field(i), depth+1); err != nil {
				return err
			}
		}
	default:
		return errCodec
	}
	return nil
}

func (d *decoder) decodeSlice(v reflect.Value, depth int) error {
	n, err := d.length()
	if err != nil || n < 0 {
		return err
	}
	if err := d.chargeN(n, v.Type().Elem()); err != nil {
		return err
	}
	s := reflect.MakeSlice(v.Type(), n, n)
	if v.Type().Elem().Kind() == reflect.Uint8 {
		copy(s.Bytes(), d.b[:n])
		d.b = d.b[n:]
	} else {
		for i := 0; i < n; i++ {
			if err := d.decodeValue(s.Index(i), depth+1); err != nil {
				return err
			}
		}
	}
	v.Set(s)
	return nil
}

func (d *decoder) decodeMap(v reflect.Value, depth int) error {
	n, err := d.length()
	if err != nil || n < 0 {
		return err
	}
	t := v.Type()
	// (a map's buckets: about twice its keys and values)
	if err := d.chargeN(2*n, t.Key()); err != nil {
		return err
	}
	if err := d.chargeN(2*n, t.Elem()); err != nil {
		return err
	}
	m := reflect.MakeMapWithSize(t, n)
	k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
	for i := 0; i < n; i++ {
		k.SetZero()
		e.SetZero()
		if err := d.decodeValue(k, depth+1); err != nil {
			return err
		}
		if err := d.decodeValue(e, depth+1); err != nil {
			return err
		}
		m.SetMapIndex(k, e)
	}
	v.Set(m)
	return nil
}

// encodeValue appends to b the encoding of *v.
func encodeValue[T any](b []byte, v *T) []byte {
	return appendValue(b, reflect.ValueOf(v).Elem())
}

// decodeInto decodes b, all of it, into *v, allocating at most
// allocRatio times b's size (plus allocSlack), and at most limit (0: no
// limit but that).
func decodeInto[T any](b []byte, v *T, limit int64) error {
	left := allocRatio*int64(len(b)) + allocSlack
	if limit > 0 {
		left = min(left, limit)
	}
	d := decoder{b: b, left: left}
	if err := d.decodeValue(reflect.ValueOf(v).Elem(), 0); err != nil {
		return err
	}
	if len(d.b) != 0 {
		return errCodec
	}
	return nil
}
