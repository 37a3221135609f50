package capfile

import (
	"debug/elf"
	"encoding/binary"

	"stackshot/internal/arch"
	"stackshot/procmaps"
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

// syscallFromRegs is the system call a core's thread was blocked in, from
// its registers as the kernel left them when it was stopped for the dump:
// orig_rax holds the call's number and rax the restart code (or -EINTR)
// the call returns with when a signal interrupts it; the arguments are
// rdi, rsi, rdx, r10, r8, r9. nil when the thread was not in a call.
func syscallFromRegs(regs []uint64) *procmaps.Syscall {
	if len(regs) < arch.UserRegsCount {
		return nil
	}
	nr := int64(regs[arch.UserOrigRAX])
	switch int64(regs[arch.UserRAX]) {
	case -4, -512, -513, -514, -516: // EINTR, ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK
	default:
		return nil
	}
	if nr < 0 || nr > 1023 {
		return nil
	}
	return &procmaps.Syscall{InCall: true, Nr: nr, SP: regs[arch.UserRSP], PC: regs[arch.UserRIP],
		Args: [6]uint64{regs[arch.UserRDI], regs[arch.UserRSI], regs[arch.UserRDX], regs[arch.UserR10],
			regs[arch.UserR8], regs[arch.UserR9]}}
}
