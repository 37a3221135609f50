package arch

import "fmt"

// ARM64 is the name captures carry for aarch64 Linux.
const ARM64 = "arm64"

// Indexes into the arm64 user_pt_regs (asm/ptrace.h): x0..x30, sp, pc,
// pstate, as PTRACE_GETREGSET NT_PRSTATUS and a core's NT_PRSTATUS carry
// them.
const (
	ARM64UserX0     = 0
	ARM64UserFP     = 29 // x29, the frame pointer
	ARM64UserLR     = 30 // x30, the link register
	ARM64UserSP     = 31
	ARM64UserPC     = 32
	ARM64UserPstate = 33

	ARM64UserRegsCount = 34 // words
)

// ARM64SyscallArgRegs are the user_pt_regs indexes of a system call's six
// arguments (x0..x5); its number is in x8.
var ARM64SyscallArgRegs = [6]int{0, 1, 2, 3, 4, 5}

// ARM64SyscallNrReg is the register that holds the system call number.
const ARM64SyscallNrReg = 8

// ARM64SVC is the encoding of `svc #0`, the system call instruction.
const ARM64SVC = 0xd4000001

// SyscallNameARM64 returns the arm64 (asm-generic) name of a system call
// number.
func SyscallNameARM64(nr int64) string {
	if nr >= 0 && nr < int64(len(syscallNamesARM64)) && syscallNamesARM64[nr] != "" {
		return syscallNamesARM64[nr]
	}
	return fmt.Sprintf("syscall_%d", nr)
}

// SyscallNameFor names system call nr on the architecture arch (AMD64 or
// ARM64; anything else is named by number).
func SyscallNameFor(arch string, nr int64) string {
	switch arch {
	case ARM64:
		return SyscallNameARM64(nr)
	case AMD64, "":
		return SyscallName(nr)
	}
	return fmt.Sprintf("syscall_%d", nr)
}

// OfRegs names the architecture whose user register set has n words
// (a thread's captured registers), or the host's when n says nothing (a
// thread read without registers).
func OfRegs(n int) string {
	switch n {
	case ARM64UserRegsCount:
		return ARM64
	case UserRegsCount:
		return AMD64
	}
	return Host
}
