package otlp

import (
	"bytes"
	"compress/gzip"
	"errors"

	"stackshot/internal/otlppb"
)

// Encode returns the request body that carries pd: an
// ExportProfilesServiceRequest, gzipped; the gzip is what goes on the wire
// and into the spool as it is.
func Encode(pd *otlppb.ProfilesData) ([]byte, error) {
	raw := pd.Encode()
	var buf bytes.Buffer
	buf.Grow(len(raw)/4 + 64)
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// The collector's answers are small protobuf messages, read here by hand
// (a protobuf library would bring gRPC into the binary):
//
//	ExportProfilesServiceResponse { ExportProfilesPartialSuccess partial_success = 1; }
//	ExportProfilesPartialSuccess  { int64 rejected_profiles = 1; string error_message = 2; }
//	google.rpc.Status             { int32 code = 1; string message = 2; ... }
//
// Both interesting messages have a varint field 1 and a string field 2.

var errWire = errors.New("malformed protobuf")

// maxAnswer bounds how much of a collector's answer is read.
const maxAnswer = 64 << 10

// intAndString reads fields 1 (varint) and 2 (bytes) of a message,
// skipping the others; has tells whether either was present.
func intAndString(b []byte) (n int64, s string, has bool, err error) {
	for len(b) > 0 {
		key, k := uvarint(b)
		if k <= 0 {
			return 0, "", false, errWire
		}
		b = b[k:]
		field, typ := key>>3, key&7
		switch typ {
		case 0: // varint
			v, k := uvarint(b)
			if k <= 0 {
				return 0, "", false, errWire
			}
			b = b[k:]
			if field == 1 {
				n, has = int64(v), true
			}
		case 1: // fixed64
			if len(b) < 8 {
				return 0, "", false, errWire
			}
			b = b[8:]
		case 5: // fixed32
			if len(b) < 4 {
				return 0, "", false, errWire
			}
			b = b[4:]
		case 2: // length-delimited
			l, k := uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return 0, "", false, errWire
			}
			v := b[k : k+int(l)]
			b = b[k+int(l):]
			if field == 2 {
				s, has = string(v), true
			}
		default:
			return 0, "", false, errWire
		}
		if field == 0 {
			return 0, "", false, errWire
		}
	}
	return n, s, has, nil
}

// field1 returns the bytes of the first length-delimited field 1.
func field1(b []byte) ([]byte, bool, error) {
	for len(b) > 0 {
		key, k := uvarint(b)
		if k <= 0 {
			return nil, false, errWire
		}
		b = b[k:]
		switch key & 7 {
		case 0:
			_, k := uvarint(b)
			if k <= 0 {
				return nil, false, errWire
			}
			b = b[k:]
		case 1:
			if len(b) < 8 {
				return nil, false, errWire
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return nil, false, errWire
			}
			b = b[4:]
		case 2:
			l, k := uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return nil, false, errWire
			}
			if key>>3 == 1 {
				return b[k : k+int(l)], true, nil
			}
			b = b[k+int(l):]
		default:
			return nil, false, errWire
		}
	}
	return nil, false, nil
}

// uvarint decodes a varint of at most 10 bytes; k <= 0 when malformed.
func uvarint(b []byte) (v uint64, k int) {
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if i == 9 && c > 1 {
				return 0, -1
			}
			return v, i + 1
		}
	}
	return 0, -1
}

// partialSuccess reads an ExportProfilesServiceResponse.
func partialSuccess(b []byte) (rejected int64, msg string, err error) {
	ps, ok, err := field1(b)
	if err != nil || !ok {
		return 0, "", err
	}
	rejected, msg, _, err = intAndString(ps)
	return rejected, msg, err
}

// statusMessage reads a google.rpc.Status's message.
func statusMessage(b []byte) (string, bool) {
	_, msg, has, err := intAndString(b)
	return msg, err == nil && has && msg != ""
}
