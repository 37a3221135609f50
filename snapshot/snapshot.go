// Package snapshot wires the pipeline's stages together: it takes a raw
// capture (ptrace.Process), unwinds each thread (unwind) and names each frame
// (symtab), producing plain symbolized data for the output formats.
//
// It works on a live capture (with the target's memory and its /proc view of
// files) and on a saved one (host files only).
package snapshot

import (
	"fmt"
	"time"

	"stackshot/ptrace"
)

// Frame is one logical frame, innermost first; kernel frames come before
// user frames.
type Frame struct {
	PC              uint64
	Kind            string // "kernel" | "user"
	Function        string // "" unknown
	Offset          uint64 // PC minus the function's start
	HasOffset       bool
	Module          string // path as the target sees it
	ModuleOffset    uint64 // address in the module's ELF address space
	HasModule       bool
	BuildID         string
	File            string
	Line            int
	Inlined         bool
	Method          string // regs, cfi, fp, fp-heuristic, scan, signal, kernel
	BuildIDMismatch bool
	SignalFrame     bool // the kernel's sigreturn trampoline: <signal handler called>
	// MapStart, MapLimit and MapOffset describe the mapping that holds the
	// PC (its file offset at MapStart); zero when unknown.
	MapStart, MapLimit, MapOffset uint64
}

// Syscall describes the system call a thread is blocked in.
type Syscall struct {
	Nr      int64
	Name    string
	Args    [6]uint64
	SP, PC  uint64
	Running bool
	InCall  bool
}

// Thread is one thread's symbolized stack.
type Thread struct {
	TID     int
	Name    string
	State   string
	Syscall *Syscall
	Capture string // nostop | ptrace | proc-only
	PauseNS int64
	Frames  []Frame
	Error   string // why the stack is incomplete ("" when complete)
	Stop    string // why the unwind ended
	Torn    bool
	Signal  int
}

// Process is one process's symbolized snapshot.
type Process struct {
	PID      int
	Comm     string
	Exe      string
	Time     time.Time
	State    string
	Threads  []Thread
	Warnings []string
	WallNS   int64
}

// SyscallName returns the x86-64 name of a system call number.
func SyscallName(nr int64) string {
	if n, ok := syscallNamesX86[nr]; ok {
		return n
	}
	return fmt.Sprintf("syscall_%d", nr)
}

func convSyscall(s *ptrace.Thread) *Syscall {
	if s.Syscall == nil {
		return nil
	}
	sc := s.Syscall
	out := &Syscall{Nr: sc.Nr, Args: sc.Args, SP: sc.SP, PC: sc.PC, Running: sc.Running, InCall: sc.InCall}
	if sc.InCall {
		out.Name = SyscallName(sc.Nr)
	}
	return out
}
