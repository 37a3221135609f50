//go:build linux

package sandbox

import (
	"encoding/binary"
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"stackshot/internal/arch"
)

// runFilter runs a filter on seccomp_data for one call. The kernel loads
// its words in host order, the VM (made for packets) in network order.
func runFilter(t *testing.T, vm *bpf.VM, archID, nr uint32) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], archID)
	got, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(got)
}

// The child's filter answers every call as the filter the seccomp library
// assembles from deniedSyscalls (allow by default, EPERM for those names,
// ENOSYS for x32 calls) does, except that it refuses with EPERM what comes
// through another ABI than x86-64's, which the library lets through: i386's
// int 0x80 (where call 5 is open), or any other architecture.
func TestDeniedFilter(t *testing.T) {
	var names []string
	for _, nr := range deniedSyscalls {
		names = append(names, arch.SyscallName(int64(nr)))
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls:      []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: names}},
	}
	lib, err := policy.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	ours := deniedFilter()
	if _, err := bpf.Assemble(ours); err != nil {
		t.Fatal(err)
	}
	libVM, err := bpf.NewVM(lib)
	if err != nil {
		t.Fatal(err)
	}
	ourVM, err := bpf.NewVM(ours)
	if err != nil {
		t.Fatal(err)
	}
	var nrs []uint32
	for nr := uint32(0); nr < 1100; nr++ {
		nrs = append(nrs, nr, x32Bit|nr)
	}
	nrs = append(nrs, x32Bit-1, 1<<31, 0xffffffff, 0x7fffffff)
	denied := 0
	for _, archID := range []uint32{unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64, 0} {
		for _, nr := range nrs {
			want := runFilter(t, libVM, archID, nr)
			if archID != unix.AUDIT_ARCH_X86_64 {
				want = retDenied
			}
			if got := runFilter(t, ourVM, archID, nr); got != want {
				t.Fatalf("arch %#x call %d: %#x, the library's filter %#x", archID, nr, got, want)
			}
			if archID == unix.AUDIT_ARCH_X86_64 && nr < x32Bit && want == retDenied {
				denied++
			}
		}
	}
	if denied != len(deniedSyscalls) {
		t.Errorf("%d x86-64 calls refused, %d names listed", denied, len(deniedSyscalls))
	}
	// A few by name, as a reader of the list expects them.
	vm := ourVM
	for _, c := range []struct {
		arch, nr, want uint32
	}{
		{unix.AUDIT_ARCH_X86_64, unix.SYS_GETPID, retAllow},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_READ, retAllow},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_OPENAT, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_EXECVE, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_PTRACE, retDenied},
		{unix.AUDIT_ARCH_X86_64, x32Bit | unix.SYS_GETPID, retNoX32},
		{unix.AUDIT_ARCH_I386, 5 /* i386 open */, retDenied},
		{unix.AUDIT_ARCH_I386, 20 /* i386 getpid */, retDenied},
		{unix.AUDIT_ARCH_AARCH64, 56, retDenied},
	} {
		if got := runFilter(t, vm, c.arch, c.nr); got != c.want {
			t.Errorf("arch %#x call %d: %#x, want %#x", c.arch, c.nr, got, c.want)
		}
	}
}
