// Package report holds the data a report is made of: processes, threads and
// frames, symbolized and plain. It imports nothing of the project, so the
// output formats, offline reports and tools built on them compile and run
// on any system.
package report

import "time"

// Frame is one logical frame, innermost first; kernel frames come before
// user frames.
type Frame struct {
	PC           uint64
	SP           uint64 // user frames: the stack pointer in this frame (its callee's CFA); 0 unknown
	Kind         string // "kernel" | "user" | "java"
	Function     string // "" unknown
	Offset       uint64 // PC minus the function's start
	Module       string // path as the target sees it
	ModuleOffset uint64 // address in the module's ELF address space
	BuildID      string
	File         string
	Line         int
	Method       string // regs, cfi, fp, fp-heuristic, scan, signal, kernel
	// MapStart, MapLimit and MapOffset describe the mapping that holds the
	// PC (its file offset at MapStart); zero when unknown.
	MapStart, MapLimit, MapOffset uint64
	// The flags last, together: a deep stack is thousands of frames, and
	// each flag beside a word would cost a word.
	HasOffset       bool
	HasModule       bool
	Inlined         bool
	BuildIDMismatch bool
	// ModuleMissing means the module's file was not found (a saved
	// capture on another machine): no name, and the walk does not guess.
	ModuleMissing bool
	SignalFrame   bool // the kernel's sigreturn trampoline: <signal handler called>
	// FrameType is a runtime frame's kind (Java: interpreted, compiled,
	// inlined); 0 for native frames.
	FrameType FrameType
}

// FrameType says how a runtime's frame runs.
type FrameType uint8

const (
	FrameNative      FrameType = iota // not a runtime's frame
	FrameInterpreted                  // run by the interpreter
	FrameCompiled                     // JIT-compiled code
	FrameInlined                      // inlined into the compiled frame after it
)

var frameTypeNames = [...]string{"", "interpreted", "compiled", "inlined"}

// String is the type's name in the JSON ("" for native frames).
func (t FrameType) String() string {
	if int(t) < len(frameTypeNames) {
		return frameTypeNames[t]
	}
	return "unknown"
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
	// JavaName is a HotSpot JavaThread's java.lang.Thread name and
	// JavaState its state (in_Java, in_vm, in_native, blocked); "" for
	// other threads.
	JavaName, JavaState string
	// Diagnosis (see diagnosis.go); zero when not diagnosed.
	WaitingFor *WaitingFor
	Progress   string  // ProgressStuck | ProgressSpinning | ProgressMoving; "" single snapshot
	SameStackS float64 // seconds the user stack stayed the same across snapshots
}

// Process is one process's symbolized resolve.
type Process struct {
	PID      int
	Comm     string
	Exe      string
	Time     time.Time
	State    string
	Threads  []Thread
	Warnings []string
	WallNS   int64
	// Diagnosis (see diagnosis.go); Diagnosed is true when it ran.
	Diagnosed       bool
	Deadlocks       []Deadlock
	Groups          []Group // nil when grouping is off
	ProgressSummary *ProgressSummary
	// Runtime is set for a Go process. Goroutines is then its goroutine
	// list (empty: none), or nil when it could not be read (a warning
	// says why); GoroutinesSkipped counts those that changed while read.
	Runtime           *Runtime
	Goroutines        []Goroutine
	GoroutinesSkipped int
	// GoroutineGroups folds identical goroutine stacks (--group), or nil.
	GoroutineGroups []GoroutineGroup
}
