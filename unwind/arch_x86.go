package unwind

import (
	"encoding/binary"

	"stackshot/internal/arch"
)

// DWARF register numbers for x86-64 (System V psABI, figure 3.36).
const (
	RegRAX = 0
	RegRDX = 1
	RegRCX = 2
	RegRBX = 3
	RegRSI = 4
	RegRDI = 5
	RegRBP = 6
	RegRSP = 7
	RegR8  = 8
	RegR9  = 9
	RegR10 = 10
	RegR11 = 11
	RegR12 = 12
	RegR13 = 13
	RegR14 = 14
	RegR15 = 15
	RegRIP = 16 // the return address column

	NumRegs = 17
)

// UserRegsCount is the length of the amd64 user_regs_struct.
const UserRegsCount = arch.UserRegsCount

// RegsFromUser converts an amd64 user_regs_struct (27 words) into DWARF
// numbered registers, all known.
func RegsFromUser(u []uint64) Regs {
	var r Regs
	if len(u) < UserRegsCount {
		return r
	}
	m := [NumRegs]int{arch.UserRAX, arch.UserRDX, arch.UserRCX, arch.UserRBX, arch.UserRSI, arch.UserRDI, arch.UserRBP, arch.UserRSP,
		arch.UserR8, arch.UserR9, arch.UserR10, arch.UserR11, arch.UserR12, arch.UserR13, arch.UserR14, arch.UserR15, arch.UserRIP}
	for dw, ui := range m {
		r.Set(dw, u[ui])
	}
	return r
}

// RegsFromSyscall builds the partial register set known for a thread blocked
// in a system call, from /proc/PID/task/TID/syscall: SP, PC and the argument
// registers (rdi, rsi, rdx, r10, r8, r9).
func RegsFromSyscall(sp, pc uint64, args [6]uint64) Regs {
	var r Regs
	r.Set(RegRSP, sp)
	r.Set(RegRIP, pc)
	for i, dw := range [6]int{RegRDI, RegRSI, RegRDX, RegR10, RegR8, RegR9} {
		r.Set(dw, args[i])
	}
	return r
}

// Signal frames. When a handler returns, it pops rt_sigframe.pretcode and
// lands on the sigreturn trampoline (glibc's __restore_rt) with SP pointing
// at the ucontext that follows pretcode:
//
//	struct rt_sigframe { char *pretcode; struct ucontext uc; struct siginfo info; }
//	struct ucontext    { u64 uc_flags; ucontext *uc_link; stack_t uc_stack (24 bytes); struct sigcontext uc_mcontext; ... }
//	struct sigcontext  { r8 r9 r10 r11 r12 r13 r14 r15 rdi rsi rbp rbx rdx rax rcx rsp rip eflags ... }
const (
	// SigcontextOffset is the offset of uc_mcontext from the trampoline's SP.
	SigcontextOffset = 40
	// SigcontextSize covers the general registers through rip.
	SigcontextSize = 17 * 8
)

// sigcontextRegs maps the sigcontext's words to DWARF register numbers.
var sigcontextRegs = [17]int{RegR8, RegR9, RegR10, RegR11, RegR12, RegR13, RegR14, RegR15,
	RegRDI, RegRSI, RegRBP, RegRBX, RegRDX, RegRAX, RegRCX, RegRSP, RegRIP}

// RegsFromSigcontext decodes the general registers of a sigcontext (at
// least SigcontextSize bytes), all known.
func RegsFromSigcontext(b []byte) Regs {
	var r Regs
	if len(b) < SigcontextSize {
		return r
	}
	for i, dw := range sigcontextRegs {
		r.Set(dw, binary.LittleEndian.Uint64(b[i*8:]))
	}
	return r
}

// SigreturnTrampoline is the code of the rt_sigreturn trampoline on amd64
// (glibc's __restore_rt and the kernel's vdso): mov $15,%rax; syscall.
var SigreturnTrampoline = [...]byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05}

// sigreturnSyscallOffset is the offset of the syscall instruction in the trampoline.
const sigreturnSyscallOffset = 7

// maxCallLen is the longest call instruction callLenBefore recognises.
const maxCallLen = 7

// isCallBefore reports whether the bytes b, which end exactly at a return
// address, end with a call instruction: e8 rel32, or ff /2 with any ModRM
// form (register, register-indirect, SIB, disp8, disp32, RIP-relative).
func isCallBefore(b []byte) bool {
	ok, _, _ := decodeCallBefore(b)
	return ok
}

// decodeCallBefore is isCallBefore that also returns, for a direct call,
// its rel32 displacement (the target is the return address + rel).
func decodeCallBefore(b []byte) (ok, direct bool, rel int32) {
	n := len(b)
	if n >= 5 && b[n-5] == 0xe8 {
		return true, true, int32(binary.LittleEndian.Uint32(b[n-4:]))
	}
	for _, l := range [...]int{2, 3, 4, 6, 7} {
		if n < l || b[n-l] != 0xff {
			continue
		}
		if callModRMLen(b[n-l+1:]) == l-1 {
			return true, false, 0
		}
	}
	return false, false, 0
}

// isPLTStub reports whether code (at a call target) starts like a PLT
// entry: [endbr64] [bnd] jmp *disp32(%rip).
func isPLTStub(code []byte) bool {
	if len(code) >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa {
		code = code[4:]
	}
	if len(code) >= 1 && code[0] == 0xf2 {
		code = code[1:]
	}
	return len(code) >= 2 && code[0] == 0xff && code[1] == 0x25
}

// callModRMLen returns the length of the ModRM-encoded operand starting at
// b[0] (ModRM byte, SIB, displacement) if b[0] encodes ff /2, else -1.
func callModRMLen(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	m := b[0]
	if (m>>3)&7 != 2 {
		return -1
	}
	mod, rm := m>>6, m&7
	n := 1
	if mod != 3 && rm == 4 {
		if len(b) < 2 {
			return -1
		}
		n++ // SIB
		if mod == 0 && b[1]&7 == 5 {
			return n + 4
		}
	}
	switch mod {
	case 0:
		if rm == 5 {
			return n + 4 // RIP-relative disp32
		}
		return n
	case 1:
		return n + 1
	case 2:
		return n + 4
	}
	return n
}
