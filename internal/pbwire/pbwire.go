// Package pbwire appends the protobuf wire format: the few encodings the
// hand-written pprof and OTLP writers (internal/pprofpb, internal/otlppb)
// share. A key is field<<3 | wire type (0: varint, 2: length-delimited);
// proto3 leaves zero scalars out.
package pbwire

import (
	"encoding/binary"
	"math/bits"
)

// VarintLen is the length of x as a varint (binary.AppendUvarint writes
// varints).
func VarintLen(x uint64) int {
	return (bits.Len64(x|1) + 6) / 7
}

// AppendVarintField appends a varint field, none when x is zero.
func AppendVarintField(b []byte, field int, x uint64) []byte {
	if x == 0 {
		return b
	}
	return binary.AppendUvarint(binary.AppendUvarint(b, uint64(field)<<3), x)
}

// AppendBoolField appends a bool field, none when false.
func AppendBoolField(b []byte, field int, x bool) []byte {
	if !x {
		return b
	}
	return AppendVarintField(b, field, 1)
}

// AppendString appends a string field, none when empty; with field 0,
// only its length and bytes (the key is the caller's).
func AppendString(b []byte, field int, s string) []byte {
	if field != 0 {
		if s == "" {
			return b
		}
		b = binary.AppendUvarint(b, uint64(field)<<3|2)
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendBytes appends a message or bytes field, written even when empty
// (an empty message is still present).
func AppendBytes(b []byte, field int, data []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

// AppendPacked appends a packed repeated varint field, none when xs is
// empty. A negative value takes ten bytes, as protobuf's int32 and int64
// do.
func AppendPacked[T ~int32 | ~int64 | ~uint64](b []byte, field int, xs []T) []byte {
	if len(xs) == 0 {
		return b
	}
	n := 0
	for _, x := range xs {
		n += VarintLen(uint64(x))
	}
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	b = binary.AppendUvarint(b, uint64(n))
	for _, x := range xs {
		b = binary.AppendUvarint(b, uint64(x))
	}
	return b
}
