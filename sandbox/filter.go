//go:build linux

package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls (filter_amd64.go) fail with EPERM in the child. The Go
// runtime needs the rest (threads, memory, signals, futexes, the socket to
// its parent), so the filter allows by default and refuses what would let
// a compromised parser reach anything beyond the descriptors its parent
// handed it: opening files (io_uring could open them too), executing,
// networking, other processes (their memory, tracing, descriptors),
// changing the file system, namespaces and kernel facilities a parser
// never uses.

// loadFilter installs the filters on every thread of the child (TSYNC)
// with no_new_privs set: archGuard, and denyFilter under it. (Both are
// built here from x/sys's numbers: a seccomp library's tables of every
// architecture's system calls cost each stackshot run their start-up.)
func loadFilter() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(no_new_privs): %w", err)
	}
	if err := install("arch guard", archGuard); err != nil {
		return err
	}
	return install("denied calls", denyFilter(deniedSyscalls))
}

// archGuard refuses every system call made through another ABI than
// x86-64's (i386 through int 0x80, x32): a compromised parser could open
// files as i386 call 5. The kernel runs every filter installed and keeps
// the strictest answer.
var archGuard = []bpf.Instruction{
	bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AUDIT_ARCH_X86_64, SkipTrue: 1},
	bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
	// x32 calls come with the x86-64 arch and this bit in the number.
	bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32Bit, SkipFalse: 1},
	bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
}

// x32Bit is __X32_SYSCALL_BIT.
const x32Bit = 0x40000000

// denyFilter answers EPERM to the calls numbered nrs, and allows the rest
// (archGuard has refused other ABIs).
func denyFilter(nrs []uint32) []bpf.Instruction {
	prog := []bpf.Instruction{bpf.LoadAbsolute{Off: 0, Size: 4}} // seccomp_data.nr
	for i, nr := range nrs {
		// Past this check: the rest of the checks, then allow; then deny.
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(nrs) - i)})
	}
	return append(prog, bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)})
}

func install(what string, filter []bpf.Instruction) error {
	raw, err := bpf.Assemble(filter)
	if err != nil {
		return fmt.Errorf("seccomp(%s): %w", what, err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp(%s): %w", what, errno)
	}
	return nil
}
