// Package ptrace captures what unwinding needs from a live process: for each
// thread its registers and a copy of its stack, plus its kernel stack and
// system call, stopping each thread for as short a time as possible (or not
// at all, for threads blocked in a system call).
//
// The result is a Capture: plain data, no file handles, serialisable, so the
// unwinder and symbolizer can run on it later or on another machine.
//
// Safety: threads are attached with PTRACE_SEIZE and stopped with
// PTRACE_INTERRUPT, never PTRACE_ATTACH or SIGSTOP, so if stackshot dies at
// any instant the kernel detaches and the target runs on. A thread that will
// not stop (uninterruptible sleep, a vfork parent) is abandoned with its
// tracer thread, which the kernel then detaches; the target never sees a
// signal from stackshot.
package ptrace

import (
	"time"

	"stackshot/procmaps"
)

// Capture methods, as in the JSON contract.
const (
	MethodPtrace   = "ptrace"    // stopped with PTRACE_INTERRUPT
	MethodNoStop   = "nostop"    // blocked in a syscall, read without a stop
	MethodProcOnly = "proc-only" // would not stop (or could not be traced): only /proc
	MethodCore     = "core"      // read from an ELF core another tool wrote (gcore, the kernel)
)

// Mode selects how threads are captured.
type Mode int

const (
	ModeAuto   Mode = iota // blocked threads without a stop, running threads stopped
	ModeStop               // every thread stopped
	ModeNoStop             // never ptrace
)

// Thread is one thread's capture.
type Thread struct {
	TID         int                    `json:"tid"`
	Name        string                 `json:"name"`
	State       string                 `json:"state"` // one letter, as /proc showed it before the capture
	Syscall     *procmaps.Syscall      `json:"syscall,omitempty"`
	KernelStack []procmaps.KernelFrame `json:"kernel_stack,omitempty"`
	// KernelOutcome says how reading the kernel stack went; KernelErr is
	// its error text.
	KernelOutcome KernelOutcome `json:"kernel_outcome,omitempty"`
	KernelErr     string        `json:"kernel_err,omitempty"`
	Method        string        `json:"method"`
	PauseNS       int64         `json:"pause_ns"`
	// Regs is the amd64 user_regs_struct (27 words) for a stopped thread;
	// nil when the thread was not stopped.
	Regs      []uint64 `json:"regs,omitempty"`
	StackAddr uint64   `json:"stack_addr"`
	Stack     []byte   `json:"stack,omitempty"`
	// StackLo and StackHi bound the mapping that holds SP.
	StackLo uint64 `json:"stack_lo"`
	StackHi uint64 `json:"stack_hi"`
	// Torn means a no-stop copy may be inconsistent (the thread ran).
	Torn   bool `json:"torn,omitempty"`
	Kernel bool `json:"kernel_thread,omitempty"`
	// Outcome says why the thread was captured as Method says (callers
	// switch on it); Err is the sentence a report shows for it.
	Outcome Outcome `json:"outcome,omitempty"`
	Err     string  `json:"error,omitempty"`
	// Signal is a signal that arrived while the thread was stopped and was
	// handed back to it at detach.
	Signal int `json:"signal,omitempty"`
	// Sched is the schedstat that bracketed a consistent no-stop copy.
	Sched *procmaps.SchedStat `json:"sched,omitempty"`
	// Reused means the thread had not run since the previous capture
	// (Options.Reuse): this is that capture's copy, read again for free.
	Reused bool `json:"reused,omitempty"`
	// cpu is the CPU the thread last ran on, as /proc showed it before
	// the capture (keepOff).
	cpu int
}

// Process is a whole process's capture.
type Process struct {
	Arch      string             `json:"arch"`
	PID       int                `json:"pid"`
	Comm      string             `json:"comm"`
	Exe       string             `json:"exe"`
	Time      time.Time          `json:"time"`
	State     string             `json:"state"`
	TracerPid int                `json:"tracer_pid,omitempty"`
	Kernel    bool               `json:"kernel_thread,omitempty"`
	Maps      []procmaps.Mapping `json:"maps"`
	// VDSO is the [vdso] image copied from the target's memory.
	VDSO []byte `json:"vdso,omitempty"`
	// Auxv is /proc/PID/auxv, read after the capture (an ELF core's
	// NT_AUXV).
	Auxv []byte `json:"auxv,omitempty"`
	// BuildIDs maps a mapping's start address to the build id found in
	// the target's memory for the file mapped there.
	BuildIDs map[uint64]string `json:"build_ids,omitempty"`
	Threads  []Thread          `json:"threads"`
	// Warnings are process-level notes (a tracer already attached, ...).
	Warnings []string `json:"warnings,omitempty"`
	// MemTID is a live thread through which memory, maps and files are
	// read when the main thread has exited (0: the process id serves).
	MemTID int `json:"mem_tid,omitempty"`
	// SharedRoot: the process sees the filesystem as stackshot does (the
	// same mount namespace and root directory), so a file looked for on
	// the host need not be looked for again inside its root.
	SharedRoot bool `json:"shared_root,omitempty"`
	// PACMask (arm64) is the bits pointer authentication puts in a code
	// address (a core's NT_ARM_PAC_MASK); 0: unknown.
	PACMask uint64 `json:"pac_mask,omitempty"`
	WallNS  int64  `json:"wall_ns"`
	// FatalSignal is the signal that ended the process, from an ELF
	// core's NT_SIGINFO when it is one that dumps core; 0 otherwise.
	FatalSignal int `json:"fatal_signal,omitempty"`
}

// MemPID is the id through which the process's memory is read: the pid,
// or a live thread when the main thread has exited.
func (p *Process) MemPID() int {
	if p.MemTID != 0 {
		return p.MemTID
	}
	return p.PID
}

// DefaultStackBytes caps the stack copy of one thread.
const DefaultStackBytes = 4 << 20
