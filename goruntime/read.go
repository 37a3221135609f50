package goruntime

import (
	"encoding/binary"
	"fmt"
	"strings"
)

const (
	maxGoroutines  = 1 << 24 // entries of allgs read
	maxStack       = 1 << 30 // the runtime's own maximum goroutine stack
	maxStackRead   = 1 << 20 // bytes of one goroutine's stack copied
	maxFrames      = 1 << 10
	maxSkipReasons = 8      // frames walked per goroutine
	gScan          = 0x1000 // the runtime's _Gscan bit
	statusRunning  = "running"
	statusSyscall  = "syscall"
	statusWaiting  = "waiting"
)

// Goroutine is one goroutine as read from the runtime.
type Goroutine struct {
	ID     uint64
	Status string // the runtime's word: running, runnable, waiting, syscall, ...
	// WaitReason is the runtime's word for why a waiting goroutine waits
	// ("chan receive"); "" when not waiting or not recorded.
	WaitReason string
	// WaitSince is the runtime's nanotime when the goroutine was first
	// seen blocked by a garbage collection; 0 when not recorded.
	WaitSince int64
	// ThreadID is the OS thread (m.procid) of a goroutine on a thread
	// (running or in a system call); 0 when none.
	ThreadID int
	// GoPC is the pc of the go statement that created it (a return
	// address: look it up at GoPC-1); 0 for the main goroutine.
	GoPC      uint64
	ParentID  uint64 // the creator's goid
	HasParent bool   // the runtime records it (Go 1.21+)
	StartPC   uint64
	// PCs are the goroutine's frames, innermost first, each a resume or
	// return address (look up at pc-1, as the runtime does); nil for a
	// running goroutine, whose stack is its thread's.
	PCs []uint64
	// Funcs names PCs' functions as the pclntab does (physical frames).
	Funcs []string
}

// OnThread reports whether the goroutine is on an OS thread (running or
// in a system call), whose stack is then the thread's.
func (g *Goroutine) OnThread() bool { return g.Status == statusRunning || g.Status == statusSyscall }

// Snapshot is one read of the goroutine list.
type Snapshot struct {
	Goroutines []Goroutine // user goroutines in allgs order
	Skipped    int         // changed while read, or failed validation
	System     int         // the runtime's own goroutines, not listed (as its traceback does)
	// SkipReasons says why the first few skipped ones were skipped.
	SkipReasons []string
}

// Goroutines reads the goroutine list. The program keeps running: each
// goroutine is read, its stack walked, and the g read again; one that
// changed, or whose data is not consistent, is counted as skipped.
func (rt *Runtime) Goroutines() (*Snapshot, error) {
	l := rt.Layout
	arr, n, err := rt.allgsArray()
	if err != nil {
		return nil, err
	}
	if n > maxGoroutines {
		return nil, fmt.Errorf("runtime.allgs has %d entries (more than %d)", n, maxGoroutines)
	}
	snap := &Snapshot{}
	if n == 0 {
		return snap, nil
	}
	ptrs := make([]byte, 8*n)
	if err := readFull(rt.mem, ptrs, arr); err != nil {
		return nil, fmt.Errorf("reading the %d entries of runtime.allgs: %w", n, err)
	}
	r := reader{rt: rt, g: make([]byte, l.GSize), g2: make([]byte, l.GSize)}
	seen := make(map[uint64]bool, n)
	for i := uint64(0); i < n; i++ {
		gp := le64(ptrs[8*i:])
		g, kind := r.read(gp)
		switch kind {
		case readDead, readSystem:
			if kind == readSystem {
				snap.System++
			}
			continue
		case readTorn:
			snap.Skipped++
			if len(snap.SkipReasons) < maxSkipReasons {
				snap.SkipReasons = append(snap.SkipReasons, fmt.Sprintf("g %#x: %s", gp, r.why))
			}
			continue
		}
		if seen[g.ID] {
			snap.Skipped++ // a goid twice: the list moved under the read
			continue
		}
		seen[g.ID] = true
		snap.Goroutines = append(snap.Goroutines, g)
	}
	if r.unreadable > 0 {
		// Torn goroutines are expected; unreadable memory is not: if the
		// list itself cannot be read any more, the program has gone.
		if _, _, err := rt.allgsArray(); err != nil {
			return nil, fmt.Errorf("the program's memory became unreadable while its goroutines were read (did it exit?): %w", err)
		}
	}
	return snap, nil
}

// allgsArray returns the array and length of runtime.allgs.
func (rt *Runtime) allgsArray() (arr, n uint64, err error) {
	var hdr [24]byte
	if rt.allglen != 0 {
		// Lock-free readers read allglen, then the array: allglen is
		// never more than the array's length.
		gl, err := readWord(rt.mem, rt.allglen)
		if err != nil {
			return 0, 0, fmt.Errorf("reading runtime.allglen: %w", err)
		}
		if err := readFull(rt.mem, hdr[:], rt.allgs[0]); err != nil {
			return 0, 0, fmt.Errorf("reading runtime.allgs: %w", err)
		}
		return le64(hdr[:]), min(gl, le64(hdr[8:])), nil
	}
	for _, a := range rt.allgs {
		if err := readFull(rt.mem, hdr[:], a); err != nil {
			return 0, 0, fmt.Errorf("reading runtime.allgs: %w", err)
		}
		if l, c := le64(hdr[8:]), le64(hdr[16:]); l > n && l <= c {
			arr, n = le64(hdr[:]), l
		}
	}
	return arr, n, nil
}

type readKind uint8

const (
	readOK readKind = iota
	readDead
	readSystem
	readTorn
)

// reader reads goroutines with reused buffers.
type reader struct {
	rt    *Runtime
	g, g2 []byte
	stack []byte
	why   string // why the last goroutine was skipped
	// unreadable counts goroutines whose memory could not be read.
	unreadable int
	walk       string // why its walk failed
}

func (r *reader) torn(why string) (Goroutine, readKind) {
	r.why = why
	return Goroutine{}, readTorn
}

func (r *reader) read(gp uint64) (Goroutine, readKind) {
	l := r.rt.Layout
	if gp == 0 || gp&7 != 0 {
		return r.torn("bad g pointer")
	}
	if readFull(r.rt.mem, r.g, gp) != nil {
		r.unreadable++
		return r.torn("g unreadable")
	}
	b := r.g
	status := binary.LittleEndian.Uint32(b[l.GAtomicStatus:]) &^ gScan
	if int(status) >= len(l.Statuses) || l.Statuses[status] == "" {
		return r.torn("unknown status")
	}
	name := l.Statuses[status]
	switch name {
	case "dead", "idle", "waiting for cgo callback":
		return Goroutine{}, readDead
	}
	g := Goroutine{ID: le64(b[l.GGoid:]), Status: name, GoPC: le64(b[l.GGoPC:]), StartPC: le64(b[l.GStartPC:])}
	if g.ID == 0 || int64(g.ID) < 0 {
		return r.torn("goid 0")
	}
	if l.GParentGoid >= 0 {
		g.ParentID, g.HasParent = le64(b[l.GParentGoid:]), true
	}
	if name == statusWaiting || name == "leaked" {
		if wr := int(b[l.GWaitReason]); wr < len(l.WaitReasons) {
			g.WaitReason = l.WaitReasons[wr]
		}
	}
	if name == statusWaiting || name == statusSyscall {
		g.WaitSince = int64(le64(b[l.GWaitSince:]))
	}
	if r.system(&g) {
		return Goroutine{}, readSystem
	}
	lo, hi := le64(b[l.GStackLo:]), le64(b[l.GStackHi:])
	if lo == 0 || lo >= hi || hi-lo > maxStack {
		return r.torn("bad stack bounds")
	}
	if g.OnThread() {
		if m := le64(b[l.GM:]); m != 0 {
			if id, err := readWord(r.rt.mem, m+uint64(l.MProcID)); err == nil && id > 0 && id < 1<<31 {
				g.ThreadID = int(id)
			}
		}
	}
	if name != statusRunning {
		pc, sp := le64(b[l.GSchedPC:]), le64(b[l.GSchedSP:])
		if name == statusSyscall {
			if ssp := le64(b[l.GSyscallSP:]); ssp != 0 {
				pc, sp = le64(b[l.GSyscallPC:]), ssp
			}
		}
		if sp < lo || sp > hi {
			return r.torn("saved SP outside its stack")
		}
		if r.walk = ""; !r.walkStack(&g, pc, sp, hi) {
			return r.torn("stack walk: " + r.walk)
		}
	}
	// The same g again: if it moved while its stack was read, the walk
	// may mix two moments.
	if readFull(r.rt.mem, r.g2, gp) != nil {
		return r.torn("g unreadable on the second read")
	}
	for _, o := range []int{l.GAtomicStatus, l.GGoid, l.GSchedPC, l.GSchedSP, l.GSyscallSP, l.GStackLo} {
		if le64(r.g[o:]) != le64(r.g2[o:]) {
			return r.torn("g changed while read")
		}
	}
	return g, readOK
}

// system reports whether g is one of the runtime's own goroutines, as the
// runtime's isSystemGoroutine decides for its tracebacks: started in a
// runtime function other than runtime.main.
func (r *reader) system(g *Goroutine) bool {
	fn, ok := r.rt.pcln.funcAt(g.StartPC)
	if !ok {
		return false
	}
	switch fn.name {
	case "runtime.main", "runtime.corostart", "runtime.handleAsyncEvent":
		return false
	}
	return strings.HasPrefix(fn.name, "runtime.")
}

// rootFuncs end a goroutine's stack.
var rootFuncs = map[string]bool{"runtime.goexit": true, "runtime.mstart": true, "runtime.rt0_go": true,
	"runtime.mstart0": true}

// elideNot are the callees after which a wrapper stays in a traceback.
var elideNot = map[string]bool{"runtime.gopanic": true, "runtime.sigpanic": true, "runtime.panicwrap": true}

// walk unwinds a goroutine's stack from its saved pc and sp with the
// frame sizes of the pclntab (the runtime's unwinder on amd64: the caller's
// SP is SP plus the frame size plus the return address). The stack is
// copied once, from sp to the top; false when the walk is not consistent.
func (r *reader) walkStack(g *Goroutine, pc, sp, hi uint64) bool {
	p := r.rt.pcln
	n := min(hi-sp, maxStackRead)
	if uint64(cap(r.stack)) < n {
		r.stack = make([]byte, n)
	}
	st := r.stack[:n]
	if readFull(r.rt.mem, st, sp) != nil {
		r.walk = "stack unreadable"
		return false
	}
	base := sp
	callee := ""
	for steps := 0; steps < maxFrames; steps++ {
		fn, ok := p.funcAt(pc)
		if !ok {
			r.walk = fmt.Sprintf("pc %#x is not in Go code (%s, after %s)", pc, g.Status, strings.Join(g.Funcs, " < "))
			return false
		}
		if !fn.wrapper || elideNot[callee] {
			// Wrappers are left out as the runtime's tracebacks do,
			// unless they called a panic instead of what they wrap.
			g.PCs = append(g.PCs, pc)
			g.Funcs = append(g.Funcs, fn.name)
		}
		callee = fn.name
		if rootFuncs[fn.name] {
			return true
		}
		d, ok := p.spDelta(fn, pc)
		if !ok {
			r.walk = fmt.Sprintf("no frame size for %s at %#x", fn.name, pc)
			return false
		}
		fp := sp + uint64(d) + 8
		if fp > hi || fp-8 < base || fp-base > uint64(len(st)) {
			r.walk = fmt.Sprintf("frame of %s leaves the stack", fn.name)
			return false
		}
		ret := le64(st[fp-8-base:])
		if ret == 0 {
			return len(g.PCs) > 0
		}
		pc, sp = ret, fp
	}
	return true
}
