package unwind

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

// Indexes into the amd64 user_regs_struct (as PTRACE_GETREGSET NT_PRSTATUS returns it).
const (
	userR15 = iota
	userR14
	userR13
	userR12
	userRBP
	userRBX
	userR11
	userR10
	userR9
	userR8
	userRAX
	userRCX
	userRDX
	userRSI
	userRDI
	userOrigRAX
	userRIP
	userCS
	userEFLAGS
	userRSP
	userSS
	userFSBase
	userGSBase
	userDS
	userES
	userFS
	userGS
	UserRegsCount
)

// RegsFromUser converts an amd64 user_regs_struct (27 words) into DWARF
// numbered registers, all known.
func RegsFromUser(u []uint64) Regs {
	var r Regs
	if len(u) < UserRegsCount {
		return r
	}
	m := [NumRegs]int{userRAX, userRDX, userRCX, userRBX, userRSI, userRDI, userRBP, userRSP,
		userR8, userR9, userR10, userR11, userR12, userR13, userR14, userR15, userRIP}
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
