package symtab

import "encoding/binary"

// GoPCValue runs one of a Go pclntab's pc-value tables (pcsp, pcfile,
// pcln, pcdata: pairs of zig-zag value delta and pc delta in quanta,
// starting at the function's entry) up to pc, as the runtime's pcvalue
// does. ok is false when the table ends, or p runs out, before pc.
func GoPCValue(p []byte, entry, pc, quantum uint64) (val int32, ok bool) {
	val = -1
	cur := entry
	for step := 0; step < maxPcvalueSteps; step++ {
		uvdelta, n := binary.Uvarint(p)
		if n <= 0 {
			return -1, false
		}
		if uvdelta == 0 && step > 0 {
			return -1, false // end of table before pc
		}
		p = p[n:]
		if uvdelta&1 != 0 {
			uvdelta = ^(uvdelta >> 1)
		} else {
			uvdelta >>= 1
		}
		pcdelta, n := binary.Uvarint(p)
		if n <= 0 {
			return -1, false
		}
		p = p[n:]
		cur += pcdelta * quantum
		val += int32(uvdelta)
		if pc < cur {
			return val, true
		}
	}
	return -1, false
}
