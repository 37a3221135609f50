package pyruntime

// line is the source line of the instruction at byte offset addrq of the
// code, from its line table in release 3.minor's format: co_lnotab (3.8,
// 3.9), 3.10's co_linetable, 3.11+'s location table. 0: none recorded.
// A negative addrq (a frame not started) is the code's first line.
func (c *code) line(minor int, addrq int64) int {
	if addrq < 0 {
		return c.first
	}
	switch {
	case minor <= 9:
		return lnotabLine(c.table, c.first, addrq)
	case minor == 10:
		return linetable310(c.table, c.first, addrq)
	}
	return locationLine(c.table, c.first, addrq)
}

// lnotabLine reads co_lnotab: (address increment, signed line increment)
// byte pairs.
func lnotabLine(t []byte, line int, addrq int64) int {
	addr := int64(0)
	for i := 0; i+1 < len(t); i += 2 {
		addr += int64(t[i])
		if addr > addrq {
			break
		}
		line += int(int8(t[i+1]))
	}
	return line
}

// linetable310 reads 3.10's co_linetable: (range length, signed line
// delta) byte pairs, a delta of -128 meaning no line.
func linetable310(t []byte, first int, addrq int64) int {
	line, computed := 0, first
	end := int64(0)
	for i := 0; i+1 < len(t); i += 2 {
		start := end
		end += int64(t[i])
		if d := int8(t[i+1]); d == -128 {
			line = 0
		} else {
			computed += int(d)
			line = computed
		}
		if start <= addrq && addrq < end {
			return line
		}
	}
	return 0
}

// locationLine reads 3.11+'s location table: entries of a first byte
// (bit 7 set, a 4-bit code, a 3-bit length in code units less one) and
// the code's operands. Codes: 15 no location, 14 long form (signed
// line delta, end line, columns), 13 no columns (signed line delta),
// 10-12 one line (delta code-10, two column bytes), 0-9 short (same line,
// one column byte).
func locationLine(t []byte, first int, addrq int64) int {
	line := first
	addr := int64(0)
	i := 0
	varint := func() int {
		v, shift := 0, 0
		for i < len(t) && shift < 32 {
			b := t[i]
			i++
			v |= int(b&63) << shift
			shift += 6
			if b&64 == 0 {
				break
			}
		}
		return v
	}
	svarint := func() int {
		v := varint()
		if v&1 != 0 {
			return -(v >> 1)
		}
		return v >> 1
	}
	for i < len(t) {
		b := t[i]
		if b&0x80 == 0 {
			return 0 // not at an entry's start: a table that does not check out
		}
		i++
		code, length := int(b>>3&15), int64(b&7)+1
		has := true
		switch {
		case code == 15:
			has = false
		case code == 14:
			line += svarint()
			varint()
			varint()
			varint()
		case code == 13:
			line += svarint()
		case code >= 10:
			line += code - 10
			i += 2
		default:
			i++
		}
		end := addr + 2*length
		if addrq >= addr && addrq < end {
			if !has {
				return 0
			}
			return line
		}
		addr = end
	}
	return 0
}
