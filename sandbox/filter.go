//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"stackshot/internal/arch"
)

// The child's seccomp filter allows what it was seen to need and refuses
// everything else with EPERM: a call it does not list (a new kernel's
// too) is refused, not let through.
//
// allowedNames are the calls the child made once its
// filter was loaded, recorded with scripts/child-syscalls.sh (every
// target's bytes sent to a child, each child traced by strace): the
// sandbox and live tests (56 children) and ten minutes of the command's
// tests (117), less those its probes make to be refused (socket, execve,
// openat, ptrace, process_vm_readv). Of them, mprotect, munmap, write,
// set_robust_list and rseq were made only by test binaries linked with
// the C library (its threads' start), write also by a child's panic.
// Besides: getppid (its probes), exit (a thread's end) and
// restart_syscall (the kernel's, to resume an interrupted call). kill,
// tgkill and clone are argRules'.
var allowedNames = []string{
	"read", "write", "close", "fstat", "pread64", "fcntl",
	"sendmsg", "recvmsg",
	"mmap", "mprotect", "munmap", "madvise",
	"rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
	"sched_yield", "nanosleep", "futex", "getpid", "getppid", "gettid",
	"clock_gettime", "exit", "exit_group",
	"epoll_create1", "epoll_ctl", "epoll_pwait", "eventfd2", "ppoll",
	"set_robust_list", "rseq",
}

// x86Numbers are the x86-64 numbers of calls named so (the filter is
// x86-64's, whatever the build's GOARCH: on another machine its
// architecture check refuses every call, and no child starts).
func x86Numbers(names ...string) []uint32 {
	x86Once.Do(func() {
		x86ByName = map[string]uint32{}
		for nr := int64(0); nr < 512; nr++ {
			x86ByName[arch.SyscallName(nr)] = uint32(nr)
		}
	})
	out := make([]uint32, len(names))
	for i, n := range names {
		nr, ok := x86ByName[n]
		if !ok {
			panic("seccomp: no x86-64 number for " + n)
		}
		out[i] = nr
	}
	return out
}

var (
	x86Once   sync.Once
	x86ByName map[string]uint32
)

// x86Number is the x86-64 number of the call named so.
func x86Number(name string) uint32 { return x86Numbers(name)[0] }

// Calls allowed with their arguments checked (argRules): signals to the
// child itself only (the Go runtime preempts its goroutines with tgkill
// to its own threads, and raises a fatal signal with kill or tgkill to
// itself); clone for a thread only, in no new namespace.
var (
	// cloneRefused are the clone flags refused: any new namespace.
	cloneRefused uint32 = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME
)

// clone3's flags are in memory the filter cannot read: it gets ENOSYS,
// on which the C library starts its threads with clone (the Go runtime
// uses clone).
const retNoClone3 = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)

// loadFilter installs the child's filter (childFilter) on every thread
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
	raw, err := bpf.Assemble(childFilter(uint32(os.Getpid())))
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

// Offsets in seccomp_data: nr, arch, instruction pointer, then six
// 64-bit arguments (the low half first on x86-64).
const (
	dataNr   = 0
	dataArch = 4
	dataArg0 = 16
)

// childFilter is the child's filter, on seccomp_data, for the child whose
// pid is self:
//   - a call through another ABI than x86-64's (i386's int 0x80, whose
//     numbers are other calls': 5 is open) is refused with EPERM;
//   - a call through the x32 ABI gets ENOSYS;
//   - kill and tgkill are allowed to the child itself only, tkill,
//     pidfd_send_signal and rt_(tg)sigqueueinfo never (argRules);
//   - clone is allowed for a thread in no new namespace; clone3 gets
//     ENOSYS;
//   - a call of allowedNames is allowed, found by a binary search over
//     their numbers; any other gets EPERM.
func childFilter(self uint32) []bpf.Instruction {
	nrs := x86Numbers(allowedNames...)
	slices.Sort(nrs)
	nrs = slices.Compact(nrs)
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: dataArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.AUDIT_ARCH_X86_64, SkipTrue: 1},
		bpf.RetConstant{Val: retDenied},
		bpf.LoadAbsolute{Off: dataNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
		bpf.RetConstant{Val: retNoX32},
	}
	for _, r := range argRules(self) {
		// (nr still in A when the call is not r's)
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(r.check))})
		prog = append(prog, r.check...)
	}
	return append(prog, searchNumbers(nrs)...)
}

// argRule is a call whose arguments decide: check runs with the call's
// number in A and ends in a return on every path.
type argRule struct {
	nr    uint32
	check []bpf.Instruction
}

func argRules(self uint32) []argRule {
	return []argRule{
		{x86Number("kill"), argIs(0, self)},
		{x86Number("tgkill"), argIs(0, self)},
		{x86Number("clone"), []bpf.Instruction{
			bpf.LoadAbsolute{Off: dataArg0, Size: 4}, // (the flags: an unsigned long, all in its low half)
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneRefused, SkipTrue: 2},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.CLONE_THREAD, SkipFalse: 1},
			bpf.RetConstant{Val: retAllow},
			bpf.RetConstant{Val: retDenied},
		}},
		{x86Number("clone3"), []bpf.Instruction{bpf.RetConstant{Val: retNoClone3}}},
	}
}

// argIs allows a call whose argument i (64 bits) is v, and refuses it
// otherwise.
func argIs(i int, v uint32) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: uint32(dataArg0 + 8*i), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipFalse: 3},
		bpf.LoadAbsolute{Off: uint32(dataArg0 + 8*i + 4), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 1},
		bpf.RetConstant{Val: retAllow},
		bpf.RetConstant{Val: retDenied},
	}
}

// searchNumbers answers retAllow for the numbers nrs (sorted) and
// retDenied for any other: a binary search, down to a few comparisons in
// a row. Every jump goes forward, within the branch it is in.
func searchNumbers(nrs []uint32) []bpf.Instruction {
	if len(nrs) <= 4 {
		var out []bpf.Instruction
		for i, nr := range nrs {
			// To the retAllow after this list's retDenied.
			out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(nrs) - i)})
		}
		return append(out, bpf.RetConstant{Val: retDenied}, bpf.RetConstant{Val: retAllow})
	}
	mid := len(nrs) / 2
	below, above := searchNumbers(nrs[:mid]), searchNumbers(nrs[mid:])
	// A jump skips at most 255 instructions: the list is far from needing
	// more (TestChildFilter).
	if len(below) > 255 {
		panic("seccomp: a branch of the filter is too long to jump over")
	}
	out := []bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: nrs[mid], SkipTrue: uint8(len(below))}}
	out = append(out, below...)
	return append(out, above...)
}
