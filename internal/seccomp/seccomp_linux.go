//go:build linux

// Package seccomp confines the calling process with a seccomp filter that
// makes a list of system calls fail with EPERM and allows the rest (the Go
// runtime needs them: threads, memory, signals, futexes).
//
// The filter is a classic BPF program (seccomp(2), "Filter return
// values"): it checks the architecture of each call first, so that a
// call through another ABI (i386's int 0x80, x32's numbers with bit 30
// set), whose numbers differ, cannot slip past the list; such calls fail
// too. Only x86-64 is supported; Deny says so elsewhere.
//
// It exists so that stackshot does not link a general seccomp library
// whose initialisation (syscall tables of every architecture it knows)
// every run paid for, dump or not, when only the sandboxed child uses it.
package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"stackshot/internal/arch"
)

// Offsets into struct seccomp_data, which the filter reads.
const (
	dataNr   = 0 // int nr
	dataArch = 4 // __u32 arch
)

// x32Bit marks x32 system call numbers (__X32_SYSCALL_BIT).
const x32Bit = 0x40000000

// Classic BPF opcodes (linux/bpf_common.h).
const (
	bpfLdWAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJgeK    = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	bpfRetK    = unix.BPF_RET | unix.BPF_K
	errnoEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
)

// Program is the filter that makes the named system calls fail with
// EPERM. An unknown name is an error: a misspelt name would otherwise
// leave that call allowed.
func Program(names []string) ([]unix.SockFilter, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("seccomp filter: %s is not supported (x86-64 only)", runtime.GOARCH)
	}
	if len(names) > 200 {
		return nil, fmt.Errorf("seccomp filter: %d names (most 200: jumps must stay short)", len(names))
	}
	nrs := make([]uint32, 0, len(names))
	for _, name := range names {
		nr, ok := arch.SyscallNumber(name)
		if !ok {
			return nil, fmt.Errorf("seccomp filter: no system call %q on x86-64", name)
		}
		nrs = append(nrs, uint32(nr))
	}
	// deny is the index of the last instruction; each jump's offset
	// counts from the instruction after it.
	deny := 4 + len(nrs) + 1
	to := func(at int) uint8 { return uint8(deny - at - 1) }
	prog := []unix.SockFilter{
		{Code: bpfLdWAbs, K: dataArch},
		{Code: bpfJeqK, K: unix.AUDIT_ARCH_X86_64, Jf: to(1)},
		{Code: bpfLdWAbs, K: dataNr},
		{Code: bpfJgeK, K: x32Bit, Jt: to(3)},
	}
	for i, nr := range nrs {
		prog = append(prog, unix.SockFilter{Code: bpfJeqK, K: nr, Jt: to(4 + i)})
	}
	prog = append(prog,
		unix.SockFilter{Code: bpfRetK, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: bpfRetK, K: errnoEPERM})
	return prog, nil
}

// Deny sets no_new_privs and installs the filter of Program(names) on
// every thread of the process (SECCOMP_FILTER_FLAG_TSYNC). It cannot be
// undone.
func Deny(names []string) error {
	prog, err := Program(names)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp filter: setting no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp filter: %w", errno)
	case r != 0:
		// TSYNC: a thread that could not be synchronised (its id).
		return fmt.Errorf("seccomp filter: thread %d could not take the filter", r)
	}
	return nil
}
