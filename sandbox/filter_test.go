//go:build linux

package sandbox

import (
	"encoding/binary"
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// runFilter runs a filter on seccomp_data for one call with arguments
// args. The kernel loads its words in host order, the VM (made for
// packets) in network order.
func runFilter(t *testing.T, vm *bpf.VM, archID, nr uint32, args ...uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[dataNr:], nr)
	binary.BigEndian.PutUint32(data[dataArch:], archID)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[dataArg0+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[dataArg0+8*i+4:], uint32(a>>32))
	}
	got, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(got)
}

// The child's filter answers every call without an argument rule as the
// filter the seccomp library assembles from allowedNames (EPERM by
// default, those names allowed, ENOSYS for x32 calls) does, except that it
// refuses with EPERM what comes through another ABI than x86-64's, which
// the library lets through: i386's int 0x80 (where call 5 is open), or any
// other architecture. The calls with argument rules answer by their
// arguments: signals to the child itself only, clone for threads only.
func TestChildFilter(t *testing.T) {
	names := allowedNames
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionErrno,
		Syscalls:      []seccomp.SyscallGroup{{Action: seccomp.ActionAllow, Names: names}},
	}
	lib, err := policy.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	const self = 4242
	ours := childFilter(self)
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
	ruled := map[uint32]bool{}
	for _, r := range argRules(self) {
		ruled[r.nr] = true
	}
	var nrs []uint32
	for nr := uint32(0); nr < 1100; nr++ {
		nrs = append(nrs, nr, x32Bit|nr)
	}
	nrs = append(nrs, x32Bit-1, 1<<31, 0xffffffff, 0x7fffffff)
	allowed := 0
	for _, archID := range []uint32{unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_AARCH64, 0} {
		for _, nr := range nrs {
			if archID == unix.AUDIT_ARCH_X86_64 && ruled[nr] {
				continue
			}
			want := runFilter(t, libVM, archID, nr)
			if archID != unix.AUDIT_ARCH_X86_64 {
				want = retDenied
			}
			if got := runFilter(t, ourVM, archID, nr); got != want {
				t.Fatalf("arch %#x call %d: %#x, the library's filter %#x", archID, nr, got, want)
			}
			if archID == unix.AUDIT_ARCH_X86_64 && nr < x32Bit && want == retAllow {
				allowed++
			}
		}
	}
	if allowed != len(allowedNames) {
		t.Errorf("%d x86-64 calls allowed, %d names listed", allowed, len(allowedNames))
	}
	// By name and arguments, as a reader of the rules expects them.
	thread := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_SYSVSEM | unix.CLONE_THREAD)
	for _, c := range []struct {
		arch, nr uint32
		args     []uint64
		want     uint32
	}{
		{unix.AUDIT_ARCH_X86_64, unix.SYS_GETPID, nil, retAllow},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_READ, nil, retAllow},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_OPENAT, nil, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_EXECVE, nil, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_PTRACE, nil, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_PRLIMIT64, nil, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_SETPRIORITY, nil, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_TKILL, []uint64{self}, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_PIDFD_SEND_SIGNAL, nil, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_OPEN_TREE, nil, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_IO_URING_SETUP, nil, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_KILL, []uint64{self, 9}, retAllow},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_KILL, []uint64{self + 1, 9}, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_KILL, []uint64{1<<32 | self, 9}, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_KILL, []uint64{0, 9}, retDenied},          // (its process group)
		{unix.AUDIT_ARCH_X86_64, unix.SYS_KILL, []uint64{^uint64(0), 9}, retDenied}, // (everyone)
		{unix.AUDIT_ARCH_X86_64, unix.SYS_TGKILL, []uint64{self, self + 1, 23}, retAllow},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_TGKILL, []uint64{1, 1, 23}, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_CLONE, []uint64{thread}, retAllow},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_CLONE, []uint64{thread | unix.CLONE_NEWUSER}, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_CLONE, []uint64{thread | unix.CLONE_NEWNS}, retDenied},
		{unix.AUDIT_ARCH_X86_64, unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, retDenied}, // (fork)
		{unix.AUDIT_ARCH_X86_64, unix.SYS_CLONE3, nil, retNoClone3},
		{unix.AUDIT_ARCH_X86_64, x32Bit | unix.SYS_GETPID, nil, retNoX32},
		{unix.AUDIT_ARCH_I386, 5 /* i386 open */, nil, retDenied},
		{unix.AUDIT_ARCH_I386, 20 /* i386 getpid */, nil, retDenied},
		{unix.AUDIT_ARCH_I386, 37 /* i386 kill */, []uint64{self}, retDenied},
		{unix.AUDIT_ARCH_AARCH64, 56, nil, retDenied},
	} {
		if got := runFilter(t, ourVM, c.arch, c.nr, c.args...); got != c.want {
			t.Errorf("arch %#x call %d%v: %#x, want %#x", c.arch, c.nr, c.args, got, c.want)
		}
	}
}

// A child tries each family of calls its filter refuses, each made so
// that the kernel would answer otherwise (succeed, ESRCH, EINVAL, EBADF,
// EFAULT) if the filter let it through: each gets EPERM (clone3: ENOSYS).
// Its signals to itself still go (the runtime's preemption needs them).
func TestChildFilterRefuses(t *testing.T) {
	needRoot(t)
	c := startChild(t, liveConfig(), Target{UID: -1, GID: -1})
	if got, err := c.Probe("tgkill-self"); err != nil || got != "ok" {
		t.Errorf("tgkill to itself: %q %v, want ok", got, err)
	}
	for name := range forbidden {
		got, err := c.Probe(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := unix.EPERM.Error()
		if name == "clone3" {
			want = unix.ENOSYS.Error()
		}
		if got != want {
			t.Errorf("%s in the child: %q, want %q", name, got, want)
		}
	}
}

// The probes of TestChildFilterRefuses are the kernel's to refuse
// otherwise: made here, by the test (root, no filter), none gets EPERM,
// so the child's EPERM is its filter's.
func TestForbiddenProbesPassWithoutFilter(t *testing.T) {
	needRoot(t)
	for name, f := range forbidden {
		switch name {
		case "clone-newuser", "clone-process", "clone3", "unshare", "mount", "prlimit64", "setpriority", "kill-parent", "chdir":
			continue // (they would change the test process itself; the filter test covers them by number)
		}
		if err := f(); err == unix.EPERM {
			t.Errorf("%s without the filter: %v", name, err)
		}
	}
}
