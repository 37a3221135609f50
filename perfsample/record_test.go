package perfsample

import (
	"encoding/binary"
	"errors"
	"testing"

	"stackshot/internal/arch"
)

// encode builds a sample record of this package's layout: regs in perf
// order (nil: ABI none), a stack area of size bytes of which dyn are
// copied.
func encode(pid, tid uint32, regs []uint64, abi uint64, stack []byte, size, dyn uint64) []byte {
	b := make([]byte, headerSize)
	b = binary.LittleEndian.AppendUint32(b, pid)
	b = binary.LittleEndian.AppendUint32(b, tid)
	b = binary.LittleEndian.AppendUint64(b, 123456789)
	b = binary.LittleEndian.AppendUint64(b, abi)
	for _, r := range regs {
		b = binary.LittleEndian.AppendUint64(b, r)
	}
	b = binary.LittleEndian.AppendUint64(b, size)
	if size > 0 {
		area := make([]byte, size)
		copy(area, stack)
		b = append(b, area...)
		b = binary.LittleEndian.AppendUint64(b, dyn)
	}
	binary.LittleEndian.PutUint32(b, recordSample)
	binary.LittleEndian.PutUint16(b[6:], uint16(len(b)))
	return b
}

// perfOrder returns registers whose value is 1000 + their perf bit.
func perfOrder() []uint64 {
	var r []uint64
	for _, pr := range perfRegs {
		r = append(r, 1000+uint64(pr.bit))
	}
	return r
}

func TestParseSample(t *testing.T) {
	stack := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	rec := encode(10, 11, perfOrder(), regsABI64, stack, 64, 16)
	var s Sample
	if err := ParseSample(rec, &s); err != nil {
		t.Fatal(err)
	}
	if s.PID != 10 || s.TID != 11 || s.Time != 123456789 || !s.HasRegs {
		t.Errorf("pid %d tid %d time %d regs %v", s.PID, s.TID, s.Time, s.HasRegs)
	}
	for user, want := range map[int]uint64{arch.UserRAX: 1000, arch.UserRBP: 1006, arch.UserRSP: 1007,
		arch.UserRIP: 1008, arch.UserR8: 1016, arch.UserR15: 1023, arch.UserFSBase: 0} {
		if s.Regs[user] != want {
			t.Errorf("user reg %d = %d, want %d", user, s.Regs[user], want)
		}
	}
	if string(s.Stack) != string(stack) {
		t.Errorf("stack %v, want the %d bytes copied", s.Stack, len(stack))
	}

	// A kernel thread: no registers, no stack.
	if err := ParseSample(encode(1, 2, nil, regsABINone, nil, 0, 0), &s); err != nil || s.HasRegs || s.Stack != nil {
		t.Errorf("no-regs sample: %v, regs %v, stack %d bytes", err, s.HasRegs, len(s.Stack))
	}
}

func TestParseSampleRejects(t *testing.T) {
	regs := perfOrder()
	good := encode(1, 2, regs, regsABI64, nil, 32, 32)
	cases := map[string][]byte{
		"32-bit task":      encode(1, 2, regs, regsABI32, nil, 32, 32),
		"unknown abi":      encode(1, 2, regs, 7, nil, 32, 32),
		"dyn over size":    encode(1, 2, regs, regsABI64, nil, 32, 40),
		"stack not 8x":     encode(1, 2, regs, regsABI64, nil, 12, 8),
		"header too short": good[:4],
		"not a sample":     append([]byte{2, 0, 0, 0, 0, 0, 16, 0}, make([]byte, 8)...),
	}
	for n := len(good) - 8; n > headerSize; n -= 8 {
		short := append([]byte(nil), good[:n]...)
		binary.LittleEndian.PutUint16(short[6:], uint16(n))
		cases["cut"] = short
		if err := ParseSample(short, new(Sample)); !errors.Is(err, ErrRecord) {
			t.Errorf("record cut to %d bytes: %v", n, err)
		}
	}
	sizeLie := append([]byte(nil), good...)
	binary.LittleEndian.PutUint16(sizeLie[6:], uint16(len(good)+8))
	cases["size lie"] = sizeLie
	for name, rec := range cases {
		if err := ParseSample(rec, new(Sample)); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v, want ErrRecord", name, err)
		}
	}
}

// FuzzParseSample: whatever a ring holds, parsing returns an error or a
// stack inside the record, never a panic.
func FuzzParseSample(f *testing.F) {
	f.Add(encode(1, 2, perfOrder(), regsABI64, []byte{1, 2, 3}, 64, 8))
	f.Add(encode(1, 2, nil, regsABINone, nil, 0, 0))
	f.Fuzz(func(t *testing.T, rec []byte) {
		var s Sample
		if err := ParseSample(rec, &s); err != nil {
			return
		}
		if len(s.Stack) > len(rec) || len(s.Stack) > MaxStackBytes {
			t.Fatalf("stack of %d bytes from a %d-byte record", len(s.Stack), len(rec))
		}
		if !s.HasRegs && (s.Stack != nil || s.Regs != [arch.UserRegsCount]uint64{}) {
			t.Fatalf("registers or stack without the 64-bit ABI")
		}
	})
}
