// Package arch holds the facts of each processor architecture that more
// than one stage needs: the layout of the kernel's user register set (as
// PTRACE_GETREGSET NT_PRSTATUS and ELF cores carry it) and the system call
// table. One file per architecture; the files build on every system, so a
// capture saved on one architecture can be read on another.
package arch

import "fmt"

// AMD64 is the name captures carry for x86-64 Linux.
const AMD64 = "amd64"

// Indexes into the amd64 user_regs_struct (asm/user_64.h), as
// PTRACE_GETREGSET NT_PRSTATUS and a core's NT_PRSTATUS return it.
const (
	UserR15 = iota
	UserR14
	UserR13
	UserR12
	UserRBP
	UserRBX
	UserR11
	UserR10
	UserR9
	UserR8
	UserRAX
	UserRCX
	UserRDX
	UserRSI
	UserRDI
	UserOrigRAX
	UserRIP
	UserCS
	UserEFLAGS
	UserRSP
	UserSS
	UserFSBase
	UserGSBase
	UserDS
	UserES
	UserFS
	UserGS
	UserRegsCount // 27 words
)

// SyscallName returns the x86-64 name of a system call number.
func SyscallName(nr int64) string {
	if nr >= 0 && nr < int64(len(syscallNames)) && syscallNames[nr] != "" {
		return syscallNames[nr]
	}
	return fmt.Sprintf("syscall_%d", nr)
}

// StopInterrupts reports whether a thread blocked in x86-64 system call
// nr is made to return EINTR by a ptrace stop, where other calls restart
// unseen: the calls signal(7) lists as failing with EINTR after a stop
// even without a signal handler (epoll_wait and its variants, semop and
// semtimedop, sigtimedwait), and io_getevents, which does the same (each
// checked on Linux 6.18 with a stop). A socket call with a timeout
// (SO_RCVTIMEO, SO_SNDTIMEO) does too; that cannot be told from the
// outside.
func StopInterrupts(nr int64) bool {
	switch SyscallNameFor(Host, nr) {
	case "epoll_wait", "epoll_pwait", "epoll_pwait2", "semop", "semtimedop", "rt_sigtimedwait",
		"io_getevents", "io_pgetevents":
		return true
	}
	return false
}
