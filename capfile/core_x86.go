package capfile

import (
	"debug/elf"
	"encoding/binary"

	"stackshot/internal/arch"
)

// The x86-64 Linux layouts of a core's process notes (linux/elfcore.h,
// asm/user_64.h). One file per architecture: arm64 adds its own.

const coreMachine = elf.EM_X86_64

// struct elf_prstatus (x86-64): siginfo (12), cursig (2, 2 pad),
// sigpend, sighold, pid, ppid, pgrp, sid, four timevals, pr_reg
// (user_regs_struct, 27 words), fpvalid (4, 4 pad).
const (
	prstatusSize   = 336
	prstatusSigno  = 0
	prstatusCursig = 12
	prstatusPID    = 32
	prstatusPPID   = 36
	prstatusPgrp   = 40
	prstatusSID    = 44
	prstatusReg    = 112
)

// struct elf_prpsinfo (x86-64): state, sname, zomb, nice (4 bytes, 4 pad),
// flag, uid, gid, pid, ppid, pgrp, sid, fname[16], psargs[80].
const (
	prpsinfoSize   = 136
	prpsinfoState  = 0
	prpsinfoSname  = 1
	prpsinfoUID    = 16
	prpsinfoGID    = 20
	prpsinfoPID    = 24
	prpsinfoPPID   = 28
	prpsinfoFname  = 40
	prpsinfoPsargs = 56
)

// User segment selectors of x86-64 Linux (__USER_CS, __USER_DS).
const (
	userCS = 0x33
	userSS = 0x2b
)

// enosys is -ENOSYS, what rax holds while a thread is inside a system call.
const enosys = ^uint64(37)

// syscallRegs builds the register set of a thread read without a stop from
// what /proc/PID/task/TID/syscall showed: PC, SP, the number and the six
// argument registers. The rest is unknown (zero).
func syscallRegs(nr int64, args [6]uint64, sp, pc uint64) []uint64 {
	r := make([]uint64, arch.UserRegsCount)
	r[arch.UserRIP], r[arch.UserRSP] = pc, sp
	r[arch.UserOrigRAX], r[arch.UserRAX] = uint64(nr), enosys
	r[arch.UserRDI], r[arch.UserRSI], r[arch.UserRDX] = args[0], args[1], args[2]
	r[arch.UserR10], r[arch.UserR8], r[arch.UserR9] = args[3], args[4], args[5]
	r[arch.UserCS], r[arch.UserSS] = userCS, userSS
	return r
}

func putRegs(b []byte, regs []uint64) {
	for i := 0; i < arch.UserRegsCount && i < len(regs); i++ {
		binary.LittleEndian.PutUint64(b[prstatusReg+8*i:], regs[i])
	}
}
