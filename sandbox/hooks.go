//go:build linux

package sandbox

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestHook, set by tests only (and by stackshot built with the
// stackshot_testhooks tag, from STACKSHOT_TEST_SANDBOX_HOOK), makes the
// child misbehave on purpose when asked to resolve or to name addresses:
//
//	"crash"  the child panics (uncontained) when asked to resolve
//	"hang"   the child sleeps when asked to resolve (until killed)
//	"oom"    the child allocates past its memory limit when asked to resolve
//
// and "KIND:HOOK" does HOOK only when asked for KIND: "go" (goroutines),
// "locks" (lock owners), "core" (an ELF core), "record" (a tick's
// threads to unwind) or "checkall" (a capture's no-stop checks);
// "lockdown" makes the child's lockdown fail (it never becomes ready);
// and Child.Probe asks it what a refused system call gets ("open", "exec",
// "socket", "ptrace", "vm_readv"), to spin on the CPU ("spin"), or its
// GOGC ("gogc").
var TestHook string

// TestEnv, set by stackshot built with the stackshot_testhooks tag only, is
// added to the child's environment: the other packages' test hooks
// (STACKSHOT_TEST_*) then act in the child too.
var TestEnv []string

// hookBefore runs the hook before the child's work of kind.
func hookBefore(hook, kind string) {
	if k, h, scoped := strings.Cut(hook, ":"); scoped {
		if k == kind {
			hookBeforeResolve(h)
		}
		return
	}
	hookBeforeResolve(hook)
}

func hookBeforeResolve(hook string) {
	switch hook {
	case "crash":
		// (An uncontained panic; nothing answers meanwhile.)
		go func() { panic("test hook: the sandboxed child crashes") }()
		select {}
	case "hang":
		time.Sleep(time.Hour)
	case "oom":
		var keep [][]byte
		for {
			keep = append(keep, make([]byte, 64<<20)) // address space, untouched
		}
	}
}

// runHook answers a probe from the parent: what a system call the filter
// refuses gets here ("opened"/"ok" if it was allowed).
func runHook(hook string) string {
	var err error
	switch hook {
	case "open":
		var f *os.File
		if f, err = os.Open("/etc/hostname"); err == nil {
			f.Close()
		}
	case "exec":
		err = unix.Exec("/bin/true", []string{"true"}, nil)
	case "socket":
		var fd int
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0); err == nil {
			unix.Close(fd)
		}
	case "ptrace":
		err = unix.PtraceAttach(os.Getppid())
	case "vm_readv":
		buf := make([]byte, 8)
		_, err = unix.ProcessVMReadv(os.Getppid(), []unix.Iovec{{Base: &buf[0], Len: 8}},
			[]unix.RemoteIovec{{Base: 0x1000, Len: 8}}, 0)
	case "spin":
		for {
		}
	case "tgkill-self":
		// (signal 0 to itself: what the runtime's preemption needs)
		err = unix.Tgkill(os.Getpid(), unix.Gettid(), 0)
	default:
		if f, ok := forbidden[hook]; ok {
			err = f()
			break
		}
		return otherHook(hook)
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// noSuchPID is a pid above any pid_max: a call on it the filter lets
// through fails with ESRCH, one it refuses with EPERM.
const noSuchPID = 1 << 30

// forbidden are the probes of the calls the child's filter refuses
// (TestChildFilterRefuses), each made so that the kernel would answer
// something else than EPERM (or succeed) if the filter let it through.
var forbidden = map[string]func() error{
	"kill":              func() error { return unix.Kill(noSuchPID, 0) },
	"kill-parent":       func() error { return unix.Kill(os.Getppid(), 0) },
	"tgkill":            func() error { return unix.Tgkill(noSuchPID, noSuchPID, 0) },
	"tkill":             func() error { return errnoOf(unix.SYS_TKILL, noSuchPID, 0, 0) },
	"pidfd_send_signal": func() error { return unix.PidfdSendSignal(-1, 0, nil, 0) },
	"prlimit64": func() error {
		var old unix.Rlimit
		return unix.Prlimit(0, unix.RLIMIT_NOFILE, nil, &old)
	},
	"setpriority":   func() error { return unix.Setpriority(unix.PRIO_PROCESS, 0, 19) },
	"clone-newuser": func() error { return errnoOf(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_FS, 0, 0) },
	// (a process, not a thread: CLONE_SIGHAND without CLONE_VM is EINVAL
	// to the kernel, nothing is started if the filter lets it through)
	"clone-process": func() error { return errnoOf(unix.SYS_CLONE, unix.CLONE_SIGHAND, 0, 0) },
	"clone3":        func() error { return errnoOf(unix.SYS_CLONE3, 0, 0, 0) },
	"unshare":       func() error { return unix.Unshare(0) },
	"mount":         func() error { return errnoOf(unix.SYS_MOUNT, 1, 1, 1) },
	"open_tree": func() error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/", 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"socket-unix": func() error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"open-raw": func() error { // (x86-64's open)
		fd, _, e := unix.Syscall(uintptr(x86Number("open")), uintptr(unsafe.Pointer(unsafe.StringData("/\x00"))), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if e != 0 {
			return e
		}
		unix.Close(int(fd))
		return nil
	},
	"openat": func() error {
		fd, err := unix.Openat(unix.AT_FDCWD, "/", unix.O_RDONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"ptrace-peek":    func() error { return errnoOf(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, noSuchPID, 0) },
	"bpf":            func() error { return errnoOf(unix.SYS_BPF, 9999, 0, 0) },
	"io_uring_setup": func() error { return errnoOf(unix.SYS_IO_URING_SETUP, 0, 0, 0) },
	"memfd_create":   func() error { return errnoOf(unix.SYS_MEMFD_CREATE, 0, 0, 0) },
	"chdir":          func() error { return unix.Chdir("/") },
}

// errnoOf makes a raw call, its errno the error (nil: it succeeded).
func errnoOf(nr, a1, a2, a3 uintptr) error {
	if _, _, e := unix.RawSyscall(nr, a1, a2, a3); e != 0 {
		return e
	}
	return nil
}

// otherHook answers the probes that are not of a refused call.
func otherHook(hook string) string {
	if hook == "gogc" {
		gc := debug.SetGCPercent(-1)
		debug.SetGCPercent(gc)
		return strconv.Itoa(gc)
	}
	return cacheProbe(hook)
}
