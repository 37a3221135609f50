//go:build linux

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The arch guard, run on seccomp_data as the kernel lays it out (nr, arch,
// ip, args): x86-64 calls go on to denyFilter, calls through the i386 ABI
// (int 0x80), the x32 ABI or any other architecture are refused with EPERM.
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
		{unix.AUDIT_ARCH_X86_64, unix.SYS_OPENAT, unix.SECCOMP_RET_ALLOW}, // (denyFilter refuses it)
		{unix.AUDIT_ARCH_X86_64, x32Bit | 257 /* x32 openat */, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{unix.AUDIT_ARCH_X86_64, x32Bit | 39 /* x32 getpid */, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
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

// The deny filter, on x86-64 calls: the listed calls get EPERM (first,
// last and one between), others are allowed. The child's probes
// (TestChildIsUnprivileged) check it installed.
func TestDenyFilter(t *testing.T) {
	nrs := []uint32{2, 257, 101, 169}
	vm, err := bpf.NewVM(denyFilter(nrs))
	if err != nil {
		t.Fatal(err)
	}
	deny := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	for nr, want := range map[uint32]uint32{2: deny, 257: deny, 101: deny, 169: deny,
		0: unix.SECCOMP_RET_ALLOW, 39: unix.SECCOMP_RET_ALLOW, 258: unix.SECCOMP_RET_ALLOW, 168: unix.SECCOMP_RET_ALLOW} {
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[0:], nr)
		binary.BigEndian.PutUint32(data[4:], unix.AUDIT_ARCH_X86_64)
		got, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		if uint32(got) != want {
			t.Errorf("call %d: %#x, want %#x", nr, got, want)
		}
	}
	if len(deniedSyscalls) > 255 {
		t.Errorf("%d denied calls: a jump reaches 255 instructions at most", len(deniedSyscalls))
	}
}
