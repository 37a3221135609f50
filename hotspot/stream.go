package hotspot

import "errors"

// errStream is a compressed stream that ran past its bytes.
var errStream = errors.New("compressed stream overrun")

// stream decodes HotSpot's compressed streams (CompressedReadStream): the
// UNSIGNED5 integer code (a byte below 192 ends a number; each byte adds
// its value times 64^i; at most five bytes), its zig-zag signed variant,
// and the line number table's pairs. Sticky: after an error it returns
// zeros.
type stream struct {
	b   []byte
	off int
	err error
}

const (
	u5Low  = 192 // bytes below end a number
	u5LogH = 6   // each further byte's weight is 64 times the previous
	u5Max  = 4   // index of the last byte of a number
)

func (s *stream) byte() uint8 {
	if s.err != nil {
		return 0
	}
	if s.off >= len(s.b) {
		s.err = errStream
		return 0
	}
	v := s.b[s.off]
	s.off++
	return v
}

// uint reads an UNSIGNED5 number.
func (s *stream) uint() uint32 {
	b0 := s.byte()
	if b0 < u5Low {
		return uint32(b0)
	}
	sum := uint32(b0)
	shift := uint(u5LogH)
	for i := 1; ; i++ {
		b := s.byte()
		sum += uint32(b) << shift
		if b < u5Low || i == u5Max || s.err != nil {
			return sum
		}
		shift += u5LogH
	}
}

// int reads a signed (zig-zag) number.
func (s *stream) int() int32 {
	v := s.uint()
	return int32(v>>1) ^ -int32(v&1)
}

// lineFor finds the line of bci in a compressed line number table (the
// bytes from its start): the line of the pair whose bci is bci, else of
// the greatest bci below it; -1 when none. At most maxPairs pairs are read.
func lineFor(table []byte, bci int) int {
	const maxPairs = 1 << 16
	s := stream{b: table}
	var curBCI, curLine int
	bestBCI, bestLine := 0, -1
	for i := 0; i < maxPairs; i++ {
		next := s.byte()
		if next == 0 || s.err != nil {
			break
		}
		if next == 0xff {
			curBCI += int(s.int())
			curLine += int(s.int())
		} else {
			curBCI += int(next >> 3)
			curLine += int(next & 7)
		}
		if s.err != nil {
			break
		}
		if curBCI == bci {
			return curLine
		}
		if curBCI < bci && curBCI >= bestBCI {
			bestBCI, bestLine = curBCI, curLine
		}
	}
	return bestLine
}
