//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls (x86-64 numbers) fail with EPERM in the child:
// deniedFilter assembles them into the child's seccomp filter, a binary
// search over them. TestDeniedFilter runs it, call by call, beside the
// filter the seccomp library github.com/elastic/go-seccomp-bpf assembles
// from their names, and requires the same answers. The library is linked
// into the tests only (its package initialiser cost every run of stackshot
// 0.18 ms); the child once loaded its filter, a list of comparisons, and
// a second one of its own for other ABIs: 0.22 ms of its start, against
// 0.12 for this one.
//
// The Go runtime needs the rest (threads, memory, signals, futexes, the
// socket to its parent), so the filter allows by default and refuses what
// would let a compromised parser reach anything beyond the descriptors its
// parent handed it: opening files (io_uring could open them too),
// executing, networking, other processes (their memory, tracing,
// descriptors), changing the file system, namespaces and kernel facilities
// a parser never uses.
var deniedSyscalls = []uint32{
	unix.SYS_OPEN, unix.SYS_OPENAT, unix.SYS_OPENAT2, unix.SYS_CREAT, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_EXECVE, unix.SYS_EXECVEAT,
	unix.SYS_SOCKET, unix.SYS_SOCKETPAIR, unix.SYS_CONNECT, unix.SYS_BIND, unix.SYS_LISTEN, unix.SYS_ACCEPT, unix.SYS_ACCEPT4,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_OPEN, unix.SYS_PIDFD_GETFD, unix.SYS_KCMP,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_MKDIR, unix.SYS_MKDIRAT, unix.SYS_RMDIR, unix.SYS_UNLINK, unix.SYS_UNLINKAT, unix.SYS_RENAME, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2,
	unix.SYS_LINK, unix.SYS_LINKAT, unix.SYS_SYMLINK, unix.SYS_SYMLINKAT, unix.SYS_CHMOD, unix.SYS_FCHMODAT, unix.SYS_CHOWN, unix.SYS_LCHOWN, unix.SYS_FCHOWNAT,
	unix.SYS_TRUNCATE, unix.SYS_MKNOD, unix.SYS_MKNODAT, unix.SYS_CHDIR, unix.SYS_CHROOT, unix.SYS_PIVOT_ROOT, unix.SYS_MOUNT, unix.SYS_UMOUNT2,
	unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETREGID, unix.SYS_SETRESUID, unix.SYS_SETRESGID, unix.SYS_SETGROUPS,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE, unix.SYS_KEXEC_LOAD, unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF,
}

// loadFilter installs the child's filter (deniedFilter) on every thread
// of the child (TSYNC), with no_new_privs set.
//
// no_new_privs is a thread's: the filter is loaded from the thread that
// set it. A goroutine may move to another thread between two system
// calls (it did, once in a test run: the filter was refused, EACCES, and
// the child did not start).
func loadFilter() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(no_new_privs): %w", err)
	}
	raw, err := bpf.Assemble(deniedFilter())
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	if err := loadProgram(filter); err != nil {
		return fmt.Errorf("seccomp: %w", err)
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

// What the filter answers.
const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retDenied = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNoX32  = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// x32Bit marks a call made through the x32 ABI (its numbers are x86-64's
// with this bit set).
const x32Bit = 0x40000000

// deniedFilter is the child's filter, on seccomp_data (nr, arch, ...):
//   - a call through another ABI than x86-64's (i386's int 0x80, whose
//     numbers are other calls': 5 is open) is refused with EPERM;
//   - a call through the x32 ABI gets ENOSYS, as the library's filter
//     answers;
//   - a call of deniedSyscalls gets EPERM, found by a binary search over
//     their numbers; the rest are allowed.
func deniedFilter() []bpf.Instruction {
	nrs := slices.Clone(deniedSyscalls)
	slices.Sort(nrs)
	nrs = slices.Compact(nrs)
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AUDIT_ARCH_X86_64, SkipTrue: 1},
		bpf.RetConstant{Val: retDenied},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
		bpf.RetConstant{Val: retNoX32},
	}
	return append(prog, searchNumbers(nrs)...)
}

// searchNumbers answers retDenied for the numbers nrs (sorted) and
// retAllow for any other: a binary search, down to a few comparisons in
// a row. Every jump goes forward, within the branch it is in.
func searchNumbers(nrs []uint32) []bpf.Instruction {
	if len(nrs) <= 4 {
		var out []bpf.Instruction
		for i, nr := range nrs {
			// To the retDenied after this list's retAllow.
			out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(nrs) - i)})
		}
		return append(out, bpf.RetConstant{Val: retAllow}, bpf.RetConstant{Val: retDenied})
	}
	mid := len(nrs) / 2
	below, above := searchNumbers(nrs[:mid]), searchNumbers(nrs[mid:])
	// A jump skips at most 255 instructions: the list is far from needing
	// more (TestDeniedFilter).
	if len(below) > 255 {
		panic("seccomp: a branch of the filter is too long to jump over")
	}
	out := []bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: nrs[mid], SkipTrue: uint8(len(below))}}
	out = append(out, below...)
	return append(out, above...)
}
