package output

import (
	"stackshot/report"
	"strings"
)

// The kernel's system-call entry path: the functions between the user/kernel
// boundary (where the kernel saves the user registers, its pt_regs) and the
// system call's own code. They are the same in every blocked thread, so the
// text prints them once, as the thread's syscall line. x86-64 (and its
// 32-bit entries) and arm64.
var (
	glueNames = map[string]bool{
		"do_syscall_64": true, "x64_sys_call": true, "ia32_sys_call": true,
		"do_fast_syscall_32": true, "__do_fast_syscall_32": true, "do_int80_syscall_32": true,
		"do_SYSENTER_32": true, "invoke_syscall": true, "do_el0_svc": true, "do_el0_svc_compat": true,
	}
	gluePrefixes = []string{
		"entry_SYSCALL", "entry_SYSENTER", "entry_INT80", "el0_svc", "el0t_",
		"__x64_sys_", "__ia32_sys_", "__x64_compat_sys_", "__ia32_compat_sys_", "__arm64_sys_",
		"__arm64_compat_sys_", "__se_sys_", "__se_compat_sys_", "__do_sys_", "__do_compat_sys_",
	}
)

// SyscallGlue reports whether kernel function fn is system-call entry glue.
func SyscallGlue(fn string) bool {
	if i := strings.IndexByte(fn, '.'); i > 0 { // a compiler's clone: .isra.0, .cold
		fn = fn[:i]
	}
	if glueNames[fn] {
		return true
	}
	for _, p := range gluePrefixes {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// glueRun returns the indexes [from, to) of t's kernel frames that are
// entry glue: the outermost run of them, next to the user frames (from ==
// to: none). A frame whose function is unknown ends the run: it is shown.
func glueRun(t *report.Thread) (from, to int) {
	for to < len(t.Frames) && t.Frames[to].Kind == "kernel" {
		to++
	}
	from = to
	for from > 0 && SyscallGlue(t.Frames[from-1].Function) {
		from--
	}
	return from, to
}
