// Package unwind turns a thread's registers and a copy of its stack into a
// list of physical frames (one PC per frame), each with the method that found
// it: DWARF CFI, signal frames, frame pointers, and stack scanning as the
// last resort.
//
// The package never touches a live process: it reads registers keyed by DWARF
// register number, the captured stack bytes, and modules through the Space
// interface, so it runs on a live capture or on a saved one on another
// machine.
package unwind

// Method says how a frame was found.
type Method uint8

const (
	MethodRegs        Method = iota // frame 0, from the registers
	MethodCFI                       // DWARF call-frame information
	MethodFP                        // frame-pointer chain
	MethodFPHeuristic               // frame pointer found by scanning (partial registers)
	MethodScan                      // stack scanning
	MethodSignal                    // restored from a signal frame
	MethodPclntab                   // Go's frame size at the PC, from the pclntab
	MethodJIT                       // the layout a JIT runtime gives its frame (JITCode)
)

var methodNames = [...]string{"regs", "cfi", "fp", "fp-heuristic", "scan", "signal", "pclntab", "jit"}

func (m Method) String() string {
	if int(m) < len(methodNames) {
		return methodNames[m]
	}
	return "unknown"
}

// StopReason says why a walk ended.
type StopReason uint8

const (
	StopNone         StopReason = iota // not stopped (internal)
	StopEnd                            // reached the outermost frame (undefined return address)
	StopPCZero                         // return address 0
	StopNotExec                        // PC outside executable mappings
	StopNoProgress                     // CFA/SP did not move up
	StopLeftStack                      // the next frame lies outside the stack mapping
	StopStackCopy                      // needed stack bytes beyond the captured copy
	StopMaxFrames                      // --max-frames reached
	StopNoUnwindInfo                   // no CFI, no valid frame pointer, nothing found by scanning
	StopUnknownReg                     // a rule needed a register whose value is unknown
	StopBadCFI                         // the CFI for this PC could not be evaluated
	StopFault                          // the walk panicked (a bug met on hostile input): frames after the first dropped
	StopNoModule                       // the PC's module code is unknown: file missing, or not the one mapped
)

var stopNames = [...]string{"", "end of stack", "return address 0", "pc outside executable mappings",
	"no progress", "left the stack", "stack copy too short", "max frames reached",
	"no unwind info", "unknown register", "bad cfi", "unwinder fault",
	"module code unknown (file missing, or not the one mapped)"}

func (r StopReason) String() string {
	if int(r) < len(stopNames) {
		return stopNames[r]
	}
	return "unknown"
}

// Complete reports whether the walk reached the root of the stack rather
// than giving up.
func (r StopReason) Complete() bool { return r == StopEnd || r == StopPCZero }

// Regs holds register values by DWARF register number, and which of them are
// known. A thread captured without a ptrace stop knows only a few.
type Regs struct {
	V     [NumRegs]uint64
	Known uint64 // bit n set: V[n] is valid
}

// Get returns register n and whether it is known.
func (r *Regs) Get(n int) (uint64, bool) {
	if n < 0 || n >= NumRegs || r.Known&(1<<uint(n)) == 0 {
		return 0, false
	}
	return r.V[n], true
}

// Set stores register n and marks it known.
func (r *Regs) Set(n int, v uint64) {
	if n < 0 || n >= NumRegs {
		return
	}
	r.V[n] = v
	r.Known |= 1 << uint(n)
}

// Forget marks register n unknown.
func (r *Regs) Forget(n int) {
	if n >= 0 && n < NumRegs {
		r.Known &^= 1 << uint(n)
	}
}

// Frame is one physical frame.
type Frame struct {
	PC     uint64 // exact PC for frame 0 and frames interrupted by a signal; return address otherwise
	SP     uint64 // stack pointer in this frame (the CFA of its callee)
	Method Method // how this frame was found
	// Exact is true when PC is the address of the instruction being executed
	// (frame 0, or the frame a signal interrupted) rather than a return
	// address; symbolizers look callers up at PC-1 and exact frames at PC.
	Exact bool
	// SignalFrame is true for the frame of the kernel's sigreturn trampoline
	// (printed as "<signal handler called>").
	SignalFrame bool
	// FP is the frame's RBP where a JIT frame is laid out by frame
	// pointer (its runtime reads the frame's slots from it); 0 otherwise.
	FP uint64
}

// Stack is the captured copy of a thread's stack, from Addr upward.
type Stack struct {
	Addr uint64
	Data []byte
}

// Memory reads target memory outside the stack copy (may be nil or always
// fail for saved captures).
type Memory interface {
	ReadMemory(p []byte, addr uint64) (int, error)
}

// ModuleInfo describes the mapping that contains a PC.
type ModuleInfo struct {
	Start, End uint64 // the executable mapping
	Exec       bool
	// CFI is the module's compiled table (nil if none); Bias is added to
	// the table's (file virtual) addresses to get runtime addresses.
	CFI  *Table
	Bias uint64
	// NoModule: the module's file is missing or is not the one mapped (a
	// saved capture read elsewhere, a replaced binary). Its code is
	// unknown, so the walk stops there rather than guess by frame
	// pointers or scanning.
	NoModule bool
	// Go gives the frame size of Go code where the CFI has no row (a
	// stripped Go binary has none); nil if the module has no Go pclntab.
	// Its addresses are file virtual addresses too.
	Go GoFrames
	// JIT describes code a JIT runtime wrote in this mapping; nil if none.
	JIT JITCode
}

// GoFrames gives exact frame sizes of Go code, which Go's pclntab records
// for every instruction.
type GoFrames interface {
	// FrameSize returns, for the file virtual address vaddr, the entry of
	// its function and the bytes between the stack pointer and the return
	// address's slot (the caller's SP is SP+size+8); root: the function
	// starts a stack (nothing called it); switches: it moves SP to another
	// stack, so its frame size does not lead to its caller.
	FrameSize(vaddr uint64) (entry, size uint64, root, switches, ok bool)
}

// Space describes the target's address space to the unwinder.
type Space interface {
	// Lookup returns the mapping containing addr.
	Lookup(addr uint64) (ModuleInfo, bool)
	// ReadCode reads code bytes at addr (from memory or the module's file).
	ReadCode(p []byte, addr uint64) (int, error)
}

// Input is everything a walk needs.
type Input struct {
	Regs             Regs
	Stack            Stack
	StackLo, StackHi uint64 // bounds of the mapping that holds SP (0,0: unknown)
	Space            Space
	Mem              Memory // optional
	MaxFrames        int    // 0: DefaultMaxFrames
	// Arch is the thread's architecture: ArchAMD64 (the zero value) or
	// ArchARM64, whose Regs are in arm64 slots (A64*).
	Arch Arch
	// PACMask (arm64) is the pointer-authentication code's bits in a
	// return address (a core's NT_ARM_PAC_MASK); 0: the bits above a
	// 48-bit virtual address.
	PACMask uint64
}

// Arch is the architecture of a walk.
type Arch uint8

const (
	ArchAMD64 Arch = iota
	ArchARM64
)
