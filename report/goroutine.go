package report

// Runtime names the language runtime a process runs on (Go, Python).
type Runtime struct {
	Name    string // "go", "python"
	Version string // "go1.26.8", "3.11.2"
}

// AddRuntime records that the process runs r: Runtime when it is the
// first, and then every one in Runtimes.
func (p *Process) AddRuntime(r Runtime) {
	switch {
	case p.Runtime == nil:
		p.Runtime = &r
	case len(p.Runtimes) == 0:
		p.Runtimes = []Runtime{*p.Runtime, r}
	default:
		p.Runtimes = append(p.Runtimes, r)
	}
}

// Goroutine is one goroutine of a Go process, read from its runtime.
type Goroutine struct {
	GoID   uint64
	Status string // the runtime's word: running, runnable, waiting, syscall, ...
	// WaitReason is the runtime's word for why it waits ("chan receive");
	// "" when not waiting.
	WaitReason string
	// WaitingNS is how long it has waited, as far as the runtime records
	// it (the first garbage collection that saw it blocked); HasWaiting is
	// false when the runtime has not recorded it.
	WaitingNS  int64
	HasWaiting bool
	TID        int     // the thread of a goroutine on one (running, syscall); 0 none
	Frames     []Frame // innermost first
	CreatedBy  *CreatedBy
	Error      string // why the stack is incomplete ("" when complete)
}

// OnThread reports whether the goroutine is on an OS thread: running, or
// in a system call.
func (g *Goroutine) OnThread() bool { return g.Status == "running" || g.Status == "syscall" }

// Runnable reports whether the goroutine is ready to run and waits only
// for a thread (runnable, or preempted).
func (g *Goroutine) Runnable() bool { return g.Status == "runnable" || g.Status == "preempted" }

// CreatedBy is where a goroutine was started: the go statement's function
// and position, and the goroutine that ran it.
type CreatedBy struct {
	Function string
	GoID     uint64
	HasGoID  bool // the runtime records the creator (Go 1.21+)
	File     string
	Line     int
}

// GoroutineGroup is a set of goroutines with the same function sequence.
type GoroutineGroup struct {
	GoIDs []uint64
	// Status is the wait reason (or status) the members share; "" when
	// they differ.
	Status string
	Frames []Frame // the first member's
	// CreatedBy is the first member's creator.
	CreatedBy *CreatedBy
}
