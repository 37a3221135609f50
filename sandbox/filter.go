//go:build linux

package sandbox

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
)

// deniedSyscalls fail with EPERM in the child. The Go runtime needs the
// rest (threads, memory, signals, futexes, the socket to its parent), so
// the filter allows by default and refuses what would let a compromised
// parser reach anything beyond the descriptors its parent handed it:
// opening files (io_uring could open them too), executing, networking,
// other processes (their memory, tracing, descriptors), changing the file
// system, namespaces and kernel facilities a parser never uses.
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

// loadFilter installs the filter on every thread of the child (TSYNC)
// with no_new_privs set.
func loadFilter() error {
	return seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno,
				Names:  deniedSyscalls,
			}},
		},
	})
}
