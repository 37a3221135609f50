//go:build linux

package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in the child: deniedProgram
// (filter_prog.go) is this list assembled by the seccomp library
// (github.com/elastic/go-seccomp-bpf), a filter that allows by default
// and refuses these names. TestDeniedProgram assembles it again and
// compares (with -update-filter, it writes the file): the library is
// linked into the tests only, as its package initialiser (tables of
// every architecture's system calls) cost every run of stackshot 0.18 ms,
// parent and child.
//
// The Go runtime needs the rest (threads, memory, signals, futexes, the
// socket to its parent), so the filter allows by default and refuses what
// would let a compromised parser reach anything beyond the descriptors its
// parent handed it: opening files (io_uring could open them too),
// executing, networking, other processes (their memory, tracing,
// descriptors), changing the file system, namespaces and kernel facilities
// a parser never uses.
var deniedSyscalls = []string{
	"open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at",
	"execve", "execveat",
	"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_getfd", "kcmp",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
	"link", "linkat", "symlink", "symlinkat", "chmod", "fchmodat", "chown", "lchown", "fchownat",
	"truncate", "mknod", "mknodat", "chdir", "chroot", "pivot_root", "mount", "umount2",
	"unshare", "setns", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
	"setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
	"init_module", "finit_module", "delete_module", "kexec_load", "reboot", "swapon", "swapoff",
}

// loadFilter installs the filters on every thread of the child (TSYNC)
// with no_new_privs set: archGuard, and the library's deniedProgram.
func loadFilter() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(no_new_privs): %w", err)
	}
	raw, err := bpf.Assemble(archGuard)
	if err != nil {
		return err
	}
	guard := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		guard[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	if err := loadProgram(guard); err != nil {
		return fmt.Errorf("seccomp(arch guard): %w", err)
	}
	if err := loadProgram(deniedProgram); err != nil {
		return fmt.Errorf("seccomp(denied calls): %w", err)
	}
	return nil
}

// loadProgram installs a seccomp filter on every thread (TSYNC).
func loadProgram(prog []unix.SockFilter) error {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}

// archGuard refuses every system call made through another ABI than
// x86-64's (i386 through int 0x80). The library's filter checks x32
// numbers, but lets a call of another architecture through to its default
// action, allow: a compromised parser could open files as i386 call 5.
// The kernel runs every filter installed and keeps the strictest answer.
var archGuard = []bpf.Instruction{
	bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AUDIT_ARCH_X86_64, SkipTrue: 1},
	bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
}
