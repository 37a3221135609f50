//go:build linux

package sandbox

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

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
	case "gogc":
		gc := debug.SetGCPercent(-1)
		debug.SetGCPercent(gc)
		return strconv.Itoa(gc)
	default:
		return cacheProbe(hook)
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}
