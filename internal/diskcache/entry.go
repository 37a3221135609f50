// Package diskcache is stackshot's per-user cache of what is expensive to
// rebuild from a binary (symbol tables, DWARF unit indexes and decoded
// units, decompressed debug sections: symtab decides), so that the second
// run on the same binaries (cron, scripts) builds no table.
//
// An entry is one file, named by a hash of its key, holding a header, the
// key itself, the payload and a checksum. Every read checks all of them: a
// corrupt, truncated, foreign or stale entry is a miss (and is rewritten),
// never trusted. What an entry holds is still hostile to its reader (the
// cache directory belongs to the user stackshot runs as, but the payload
// came from a file a target chose): callers bound and validate it as they
// would the file it came from.
//
// Entry format (little-endian), version 1:
//
//	magic      [8]byte  "STKSHC\x00\x01"
//	format     uint32   FormatVersion
//	keyLen     uint32   at most maxKeyBytes
//	payloadLen uint64
//	key        [keyLen]byte   Key.encode()
//	payload    [payloadLen]byte
//	crc        uint32   CRC-32 (IEEE) of everything before it
package diskcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// FormatVersion is the cache format; bump it whenever what a Kind's payload
// means changes, and every older entry becomes a miss.
const FormatVersion = 1

const (
	magic       = "STKSHC\x00\x01"
	headerBytes = 8 + 4 + 4 + 8
	crcBytes    = 4
	maxKeyBytes = 4096
)

// The checksum is CRC-32 IEEE: the carry-less multiply path needs no
// table built at start (Castagnoli's costs 0.2 ms, on every run), and
// checks tens of GB/s.
// Key names what an entry holds: its kind, and the identity of the file it
// was built from. Every field is part of the entry's name and is compared
// again on read.
type Key struct {
	Kind    string // what the payload is, e.g. "section"
	BuildID string // hex GNU build id of the file
	Size    int64  // the file's size
	Dev     uint64 // the file's device, inode and status change time:
	Ino     uint64 // a file rewritten in place (same build id and size)
	Ctime   int64  // is another key; ctime cannot be set by a user
	Part    string // which part of the file, e.g. a section's name and offset
}

// encode is the key as stored in an entry (and hashed into its name).
func (k Key) encode() []byte {
	var b bytes.Buffer
	for _, f := range []string{k.Kind, k.BuildID, strconv.FormatInt(k.Size, 10),
		strconv.FormatUint(k.Dev, 10), strconv.FormatUint(k.Ino, 10),
		strconv.FormatInt(k.Ctime, 10), k.Part} {
		b.WriteString(strconv.Quote(f))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Encode builds the entry of payload under k.
func Encode(k Key, payload []byte) []byte {
	key := k.encode()
	out := make([]byte, 0, headerBytes+len(key)+len(payload)+crcBytes)
	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint32(out, FormatVersion)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(key)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(payload)))
	out = append(out, key...)
	out = append(out, payload...)
	return binary.LittleEndian.AppendUint32(out, crc32.ChecksumIEEE(out))
}

// ErrInvalid is returned for an entry that is not a valid entry of the
// key asked for.
var ErrInvalid = errors.New("invalid cache entry")

func invalid(why string) error { return fmt.Errorf("%w: %s", ErrInvalid, why) }

// Decode checks that b is a whole, intact entry of k in this format and
// returns its payload (a subslice of b). Nothing of b is trusted before the
// checks: lengths are compared with len(b) before any slicing.
func Decode(k Key, b []byte) ([]byte, error) {
	if len(b) < headerBytes+crcBytes {
		return nil, invalid("short")
	}
	if string(b[:8]) != magic {
		return nil, invalid("bad magic")
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != FormatVersion {
		return nil, invalid("format version " + strconv.FormatUint(uint64(v), 10))
	}
	keyLen := uint64(binary.LittleEndian.Uint32(b[12:]))
	payLen := binary.LittleEndian.Uint64(b[16:])
	rest := uint64(len(b) - headerBytes - crcBytes)
	if keyLen > maxKeyBytes || keyLen > rest || payLen != rest-keyLen {
		return nil, invalid("lengths do not match the entry's size")
	}
	body := len(b) - crcBytes
	if crc32.ChecksumIEEE(b[:body]) != binary.LittleEndian.Uint32(b[body:]) {
		return nil, invalid("checksum")
	}
	key := b[headerBytes : headerBytes+keyLen]
	if !bytes.Equal(key, k.encode()) {
		return nil, invalid("another key")
	}
	return b[headerBytes+keyLen : body], nil
}
