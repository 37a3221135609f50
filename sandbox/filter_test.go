//go:build linux

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The arch guard, run on seccomp_data as the kernel lays it out (nr, arch,
// ip, args): x86-64 calls go on to the library's filter, calls through the
// i386 ABI (int 0x80) or any other architecture are refused with EPERM.
func TestArchGuard(t *testing.T) {
	vm, err := bpf.NewVM(archGuard)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		arch uint32
		nr   uint32
		want uint32
	}{
		{unix.AUDIT_ARCH_X86_64, unix.SYS_GETPID, unix.SECCOMP_RET_ALLOW},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_OPENAT, unix.SECCOMP_RET_ALLOW}, // (the library's filter refuses it)
		{unix.AUDIT_ARCH_I386, 5 /* i386 open */, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{unix.AUDIT_ARCH_I386, 20 /* i386 getpid */, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{unix.AUDIT_ARCH_AARCH64, 56, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	} {
		// struct seccomp_data; the kernel loads its words in host order,
		// the VM (made for packets) in network order.
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[0:], c.nr)
		binary.BigEndian.PutUint32(data[4:], c.arch)
		got, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		if uint32(got) != c.want {
			t.Errorf("arch %#x call %d: %#x, want %#x", c.arch, c.nr, got, c.want)
		}
	}
}
