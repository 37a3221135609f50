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
	Kind         string // "kernel" | "user" | "python" | "java" (python: no PC, no module)
	Function     string // "" unknown; Python: co_qualname (co_name before 3.11)
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
	// inlined); 0 for native frames, and for a Java native method's.
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
	// PythonName is a CPython thread's threading name ("MainThread",
	// "worker-1"); "" for other threads, or when it could not be read.
	PythonName string
	// Diagnosis (see diagnosis.go); zero when not diagnosed.
	WaitingFor *WaitingFor
	Progress   string  // ProgressStuck | ProgressSpinning | ProgressWaiting | ProgressMoving; "" single snapshot
	SameStackS float64 // seconds the user stack stayed the same across snapshots
	// FDWait names the descriptors a blocked system call is on; nil none.
	FDWait *FDWait
	// CPUShares is the thread's CPU time over each interval between
	// snapshots (1.0 = one CPU), CPUShare over all of them; WakeNS the
	// mean time between its wake-ups when they could be counted (0 not).
	CPUShares []float64
	CPUShare  float64
	WakeNS    int64
	// HoldsGIL: a CPython thread holding its interpreter's GIL.
	HoldsGIL bool
	// CalleeSaved holds the callee-saved registers at the stop (x86-64:
	// rbx, rbp, r12, r13, r14, r15), where a lock call keeps its lock;
	// nil when the thread was read without a stop.
	CalleeSaved []uint64
}

// ShownName is the name to show for thread t where a report names it (an
// owner, a deadlock, a group), in a process whose threads the system
// names comm unless told otherwise (Process.Comm): its Python threading
// name when its own name is only that (CPython before 3.14 names no
// thread for the system: all are "python3"), else its own name.
func (t *Thread) ShownName(comm string) string {
	if t.PythonName != "" && (t.Name == comm || t.Name == "") {
		return t.PythonName
	}
	return t.Name
}

// MaxCmdline bounds a process's command line as a report carries it (the
// target writes it).
const MaxCmdline = 4096

// Process is one process's symbolized resolve.
type Process struct {
	PID     int
	Comm    string
	Exe     string
	Cmdline string // its arguments joined by spaces, at most MaxCmdline bytes ("": unknown or none)
	Time    time.Time
	State   string
	Threads []Thread
	// AllThreads is how many threads the process had when only some
	// were asked for (-t); 0 otherwise.
	AllThreads int
	Warnings   []string
	WallNS     int64
	// Diagnosis (see diagnosis.go); Diagnosed is true when it ran.
	Diagnosed       bool
	Deadlocks       []Deadlock
	Groups          []Group // nil when grouping is off
	ProgressSummary *ProgressSummary
	// Runtimes lists every runtime read when a process runs several
	// (Runtime is then the first); nil when it runs one or none.
	Runtimes []Runtime
	// Runtime is set for a Go or Python process. Goroutines is then its goroutine
	// list (empty: none), or nil when it could not be read (a warning
	// says why); GoroutinesSkipped counts those that changed while read.
	Runtime           *Runtime
	Goroutines        []Goroutine
	GoroutinesSkipped int
	// GoroutineGroups folds identical goroutine stacks (--group), or nil.
	GoroutineGroups []GoroutineGroup
	// FatalSignal is the signal that ended the process (a core's
	// NT_SIGINFO); 0 none known.
	FatalSignal int
}
