package unwind

import (
	"encoding/binary"

	"stackshot/internal/arch"
)

// AArch64 (DWARF for the Arm 64-bit architecture): x0..x30 are DWARF
// registers 0..30, sp is 31, and x30 (the link register) is the return
// address column. A walk keeps the registers an unwind needs in Regs'
// slots, so an arm64 rule set is as small as an x86-64 one: the
// callee-saved x19..x29, the link register, sp, the PLT's scratch x16 and
// x17, and the PC.
const (
	A64X19 = 0  // x19..x28 are slots 0..9
	A64FP  = 10 // x29
	A64LR  = 11 // x30
	A64SP  = 12
	A64X16 = 13
	A64X17 = 14
	A64PC  = 16
)

// arm64Slot returns the slot of DWARF register dw, or NumRegs for a
// register the walk does not keep (its rules are dropped, as x86-64's
// vector registers are).
func arm64Slot(dw uint64) uint64 {
	switch {
	case dw >= 19 && dw <= 28:
		return dw - 19
	case dw == 29:
		return A64FP
	case dw == 30:
		return A64LR
	case dw == 31:
		return A64SP
	case dw == 16:
		return A64X16
	case dw == 17:
		return A64X17
	}
	return NumRegs
}

// a64CalleeSaved are the slots a caller keeps where the CFI says nothing:
// x19..x29, and the link register, which GCC's CIE leaves unset because
// a leaf function never moves it.
const a64CalleeSaved = 1<<(A64FP+1) - 1 | 1<<A64LR

// RegsFromUserARM64 converts an arm64 user_pt_regs (34 words: x0..x30,
// sp, pc, pstate) into the walk's slots, all known.
func RegsFromUserARM64(u []uint64) Regs {
	var r Regs
	if len(u) < arch.ARM64UserRegsCount {
		return r
	}
	for dw := uint64(0); dw <= 31; dw++ {
		if s := arm64Slot(dw); s < NumRegs {
			r.Set(int(s), u[dw])
		}
	}
	r.Set(A64PC, u[arch.ARM64UserPC])
	return r
}

// RegsFromSyscallARM64 is RegsFromSyscall for arm64: SP and PC only (the
// arguments, x0..x5, are not registers an unwind keeps).
func RegsFromSyscallARM64(sp, pc uint64) Regs {
	var r Regs
	r.Set(A64SP, sp)
	r.Set(A64PC, pc)
	return r
}

// Signal frames. The kernel calls a handler with SP at its rt_sigframe
// and the link register at the sigreturn trampoline (the vdso's
// __kernel_rt_sigreturn); the handler returns there with SP restored:
//
//	struct rt_sigframe { struct siginfo info (128 bytes); struct ucontext uc; }
//	struct ucontext    { u64 uc_flags; ucontext *uc_link; stack_t uc_stack (24 bytes);
//	                     sigset_t uc_sigmask (8); u8 unused[120]; struct sigcontext uc_mcontext (16-aligned, at 176); }
//	struct sigcontext  { u64 fault_address; u64 regs[31]; u64 sp; u64 pc; u64 pstate; ... }
const (
	// a64SigcontextRegs is the offset of sigcontext.regs from the
	// trampoline's SP.
	a64SigcontextRegs = 128 + 176 + 8
	// a64SigcontextSize covers regs[31], sp and pc.
	a64SigcontextSize = 33 * 8
)

// a64SigreturnTrampoline is the code of the arm64 sigreturn trampoline:
// mov x8, #139 (rt_sigreturn); svc #0.
var a64SigreturnTrampoline = [8]byte{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}

// a64DefaultPACMask is the bits of a return address above a 48-bit user
// address: where pointer authentication puts its code when a core does
// not say (NT_ARM_PAC_MASK).
const a64DefaultPACMask = 0xffff_0000_0000_0000

// isCallBeforeARM64 reports whether the instruction before a return
// address (the 4 bytes b) is a call: BL imm26 or BLR/BLRAA/BLRAB/BLRAAZ/BLRABZ.
func isCallBeforeARM64(b []byte) bool {
	if len(b) < 4 {
		return false
	}
	ins := binary.LittleEndian.Uint32(b[len(b)-4:])
	return ins&0xfc000000 == 0x94000000 || // bl
		ins&0xfffffc1f == 0xd63f0000 || // blr xn
		ins&0xfefff800 == 0xd63f0800 // blraa/blrab(z) xn
}
