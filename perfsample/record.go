// Package perfsample takes on-CPU user stacks of a process's threads from
// the kernel's perf events, without stopping them: a per-thread software
// clock event samples each thread's user registers and the top of its user
// stack into a ring buffer, which Set reads and hands over one sample at a
// time for our own unwinder to walk.
//
// Everything in a sample comes from the target (its registers, its stack
// bytes) and the record sizes are checked before use: ParseSample bounds
// every field it reads.
package perfsample

import (
	"encoding/binary"
	"errors"
	"fmt"

	"stackshot/internal/arch"
	"stackshot/internal/bin"
)

// Record types and sample layout this package asks for (uapi
// linux/perf_event.h); the layout is fixed by sampleType and regsMask.
const (
	recordLost   = 2
	recordSample = 9

	sampleTID       = 1 << 1
	sampleTime      = 1 << 2
	sampleRegsUser  = 1 << 12
	sampleStackUser = 1 << 13
	sampleType      = sampleTID | sampleTime | sampleRegsUser | sampleStackUser

	regsABINone = 0
	regsABI32   = 1
	regsABI64   = 2

	headerSize = 8
)

// perfRegs is the x86-64 perf register order (PERF_REG_X86_*) of the
// registers asked for, mapped to the user_regs_struct index the unwinder
// reads. DS, ES, FS and GS are refused by the kernel on x86-64.
var perfRegs = [...]struct {
	bit  uint
	user int
}{
	{0, arch.UserRAX}, {1, arch.UserRBX}, {2, arch.UserRCX}, {3, arch.UserRDX},
	{4, arch.UserRSI}, {5, arch.UserRDI}, {6, arch.UserRBP}, {7, arch.UserRSP},
	{8, arch.UserRIP}, {9, arch.UserEFLAGS}, {10, arch.UserCS}, {11, arch.UserSS},
	{16, arch.UserR8}, {17, arch.UserR9}, {18, arch.UserR10}, {19, arch.UserR11},
	{20, arch.UserR12}, {21, arch.UserR13}, {22, arch.UserR14}, {23, arch.UserR15},
}

// regsMask is PERF_SAMPLE_REGS_USER's mask: the registers of perfRegs.
var regsMask = func() uint64 {
	var m uint64
	for _, r := range perfRegs {
		m |= 1 << r.bit
	}
	return m
}()

// MaxStackBytes is the most user stack a sample can carry: a record's size
// is 16 bits, and the registers and header take the rest.
const MaxStackBytes = 63 << 10

// Sample is one PERF_RECORD_SAMPLE.
type Sample struct {
	PID, TID int
	Time     uint64 // perf clock, ns
	// HasRegs is false when the kernel had no user registers for the
	// sample (a kernel thread); Regs and Stack are then empty.
	HasRegs bool
	// Regs is in the amd64 user_regs_struct layout (arch.User*), as a
	// ptrace stop gives it; registers perf does not sample are zero.
	Regs [arch.UserRegsCount]uint64
	// Stack is the user stack from Regs[arch.UserRSP] up, as much as the
	// sample carried; it aliases the record.
	Stack []byte
}

// ErrRecord means a record does not have the layout asked for.
var ErrRecord = errors.New("malformed perf sample")

// ParseSample reads a PERF_RECORD_SAMPLE record (header included, rec
// exactly its size) of the layout this package opens events with. Stack
// aliases rec.
func ParseSample(rec []byte, s *Sample) error {
	if len(rec) < headerSize {
		return fmt.Errorf("%w: %d bytes, shorter than a header", ErrRecord, len(rec))
	}
	if typ := binary.LittleEndian.Uint32(rec); typ != recordSample {
		return fmt.Errorf("%w: record type %d, not a sample", ErrRecord, typ)
	}
	if size := int(binary.LittleEndian.Uint16(rec[6:])); size != len(rec) {
		return fmt.Errorf("%w: header says %d bytes, record has %d", ErrRecord, size, len(rec))
	}
	r := bin.Reader{B: rec[headerSize:]} // little endian
	pid, tid := r.U32(), r.U32()
	s.PID, s.TID = int(pid), int(tid)
	s.Time = r.U64()
	s.Regs = [arch.UserRegsCount]uint64{}
	s.Stack = nil
	abi := r.U64()
	switch abi {
	case regsABINone:
		s.HasRegs = false
	case regsABI64:
		s.HasRegs = true
		for _, pr := range perfRegs {
			s.Regs[pr.user] = r.U64()
		}
	case regsABI32:
		return fmt.Errorf("%w: a 32-bit task's registers", ErrRecord)
	default:
		return fmt.Errorf("%w: register ABI %d", ErrRecord, abi)
	}
	size := r.U64()
	if r.Err() != nil {
		return fmt.Errorf("%w: %d bytes end before the stack", ErrRecord, len(rec))
	}
	rest := r.Rest()
	if size == 0 {
		if len(rest) != 0 {
			return fmt.Errorf("%w: %d bytes after an empty stack", ErrRecord, len(rest))
		}
		return nil
	}
	// The stack, then its dynamic size: what of it was really copied.
	if size > MaxStackBytes || size%8 != 0 || uint64(len(rest)) != size+8 {
		return fmt.Errorf("%w: stack of %d bytes in %d left", ErrRecord, size, len(rest))
	}
	data := rest[:size]
	dyn := binary.LittleEndian.Uint64(rest[size:])
	if dyn > size {
		return fmt.Errorf("%w: %d stack bytes copied of %d", ErrRecord, dyn, size)
	}
	if s.HasRegs {
		s.Stack = data[:dyn:dyn]
	}
	return nil
}
