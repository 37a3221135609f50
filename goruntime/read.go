package goruntime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

const (
	maxGoroutines  = 1 << 24 // entries of allgs read
	maxStack       = 1 << 30 // the runtime's own maximum goroutine stack
	maxStackRead   = 1 << 20 // bytes of one goroutine's stack copied
	maxFrames      = 1 << 10 // frames walked per goroutine
	maxSkipReasons = 8       // reasons kept for skipped goroutines
	readAttempts   = 3       // reads of a goroutine that changed while read
	gScan          = 0x1000  // the runtime's _Gscan bit
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
	GoPCFunc  string // the function holding GoPC, by the pclntab
	ParentID  uint64 // the creator's goid
	HasParent bool   // the runtime records it (Go 1.21+)
	StartPC   uint64
	// PCs are the goroutine's frames, innermost first, each a resume or
	// return address (look up at pc-1, as the runtime does). A running
	// goroutine's stack is its thread's: PCs is nil, unless the goroutine
	// was on the system stack (its thread in the runtime's own code),
	// when PCs are the goroutine's own frames from where it left them.
	PCs []uint64
	// Funcs names PCs' functions as the pclntab does (physical frames).
	Funcs []string
	// Wrappers are the indexes in PCs of compiler-generated wrappers: the
	// runtime's traceback hides such a function's own frame but shows
	// what was inlined into it (a promoted method's body).
	Wrappers []int
	// Cut says why PCs stop short of the goroutine's first frame: the
	// stack is deeper than a walk goes. "" when whole.
	Cut string
	// StackLo and StackHi bound the goroutine's stack: a thread whose
	// stack pointer is between them runs this goroutine.
	StackLo, StackHi uint64
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
	r := reader{rt: rt}
	seen := map[uint64]bool{}
	ptrs := make([]byte, 8*readBlock)
	gps := make([]uint64, 0, readBlock)
	for start := uint64(0); start < n; start += readBlock {
		if err := rt.stopped(); err != nil {
			return nil, fmt.Errorf("%w after %d of %d goroutines", err, start, n)
		}
		k := min(n-start, readBlock)
		if err := readFull(rt.mem, ptrs[:8*k], arr+8*start); err != nil {
			if start == 0 {
				return nil, fmt.Errorf("reading the %d entries of runtime.allgs: %w", n, err)
			}
			r.unreadable++
			break
		}
		gps = gps[:0]
		for i := uint64(0); i < k; i++ {
			gps = append(gps, le64(ptrs[8*i:]))
		}
		r.block(gps, snap, seen)
	}
	// A busy program moves some goroutines while they are read: read
	// those again, a few times, rather than leave them out.
	for attempt := 2; attempt <= readAttempts && len(r.retry) > 0; attempt++ {
		if err := rt.stopped(); err != nil {
			return nil, err
		}
		again := r.retry
		r.retry, r.last = nil, attempt == readAttempts
		for start := 0; start < len(again); start += readBlock {
			r.block(again[start:min(len(again), start+readBlock)], snap, seen)
		}
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

// ErrStopped says a goroutine read ended at its deadline or was
// cancelled.
var ErrStopped = errors.New("goroutine read stopped (timeout or interrupt)")

func (rt *Runtime) stopped() error {
	if !rt.Deadline.IsZero() && time.Now().After(rt.Deadline) {
		return ErrStopped
	}
	if rt.Cancel != nil {
		select {
		case <-rt.Cancel:
			return ErrStopped
		default:
		}
	}
	return nil
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

// reader reads goroutines in blocks, with reused buffers: each block's
// g structures in one vectored read, their stacks' tops in another, and
// the g structures again in a third, so a read costs a few system calls
// per hundreds of goroutines.
type reader struct {
	rt                *Runtime
	gbuf, g2buf, sbuf []byte
	bufs              [][]byte
	addrs             []uint64
	pend              []pending
	stack             []byte // a whole stack, when a walk needs more than the window
	unreadable        int    // goroutines whose memory could not be read
	// retry collects the goroutines that changed while read, to be read
	// again; on the last attempt (last) they are counted as skipped.
	retry []uint64
	last  bool
}

// pending is one goroutine of a block between its reads.
type pending struct {
	g      Goroutine
	kind   readKind
	why    string
	gp     uint64
	b      []byte // its g as first read
	walk   bool
	pc, sp uint64
	hi     uint64
	st     []byte // the top of its stack, from sp
	stOK   bool
	retry  bool // torn by the program's own progress: worth another read
}

const (
	readBlock   = 256     // goroutines per block
	stackWindow = 8 << 10 // stack bytes read with the block
)

func (r *reader) block(gps []uint64, snap *Snapshot, seen map[uint64]bool) {
	l := r.rt.Layout
	k := len(gps)
	gs := l.GSize
	r.gbuf = grow(r.gbuf, k*gs)
	r.g2buf = grow(r.g2buf, k*gs)
	r.pend = r.pend[:0]
	r.bufs, r.addrs = r.bufs[:0], r.addrs[:0]
	for i, gp := range gps {
		r.pend = append(r.pend, pending{gp: gp, b: r.gbuf[i*gs : (i+1)*gs]})
		if gp != 0 && gp&7 == 0 {
			r.bufs, r.addrs = append(r.bufs, r.pend[i].b), append(r.addrs, gp)
		}
	}
	ok := readRanges(r.rt.mem, r.bufs, r.addrs)
	j := 0
	stackBytes := 0
	for i := range r.pend {
		p := &r.pend[i]
		if p.gp == 0 || p.gp&7 != 0 {
			p.kind, p.why = readTorn, "bad g pointer"
			continue
		}
		if !ok[j] {
			r.unreadable++
			p.kind, p.why = readTorn, "g unreadable"
		} else {
			r.parse(p)
		}
		j++
		if p.kind == readOK && p.walk {
			stackBytes += int(min(p.hi-p.sp, stackWindow))
		}
	}
	// The stacks' tops, in one read.
	r.sbuf = grow(r.sbuf, stackBytes)
	r.bufs, r.addrs = r.bufs[:0], r.addrs[:0]
	off := 0
	for i := range r.pend {
		p := &r.pend[i]
		if p.kind != readOK || !p.walk || p.hi == p.sp {
			continue
		}
		n := int(min(p.hi-p.sp, stackWindow))
		p.st = r.sbuf[off : off+n]
		off += n
		r.bufs, r.addrs = append(r.bufs, p.st), append(r.addrs, p.sp)
	}
	ok = readRanges(r.rt.mem, r.bufs, r.addrs)
	j = 0
	for i := range r.pend {
		p := &r.pend[i]
		if p.st != nil {
			p.stOK = ok[j]
			j++
		}
		if p.kind == readOK && p.walk {
			if why := r.walkStack(p); why != "" {
				// The goroutine may have been changing its stack:
				// worth another read.
				p.kind, p.why, p.retry = readTorn, "stack walk: "+why, true
			}
		}
	}
	r.reread(snap, seen)
}

// reread reads the block's g structures again: one that moved while its
// stack was read may mix two moments. The goroutines that did not move
// go into snap.
func (r *reader) reread(snap *Snapshot, seen map[uint64]bool) {
	l, gs := r.rt.Layout, r.rt.Layout.GSize
	r.bufs, r.addrs = r.bufs[:0], r.addrs[:0]
	for i := range r.pend {
		p := &r.pend[i]
		if p.kind == readOK {
			r.bufs, r.addrs = append(r.bufs, r.g2buf[i*gs:(i+1)*gs]), append(r.addrs, p.gp)
		}
	}
	ok := readRanges(r.rt.mem, r.bufs, r.addrs)
	j := 0
	for i := range r.pend {
		p := &r.pend[i]
		if p.kind == readOK {
			if !ok[j] {
				p.kind, p.why = readTorn, "g unreadable on the second read"
			} else if !sameG(l, p.b, r.g2buf[i*gs:(i+1)*gs]) {
				p.kind, p.why, p.retry = readTorn, "g changed while read", true
			}
			j++
		}
		switch p.kind {
		case readSystem:
			snap.System++
		case readTorn:
			if p.retry && !r.last {
				r.retry = append(r.retry, p.gp)
				continue
			}
			snap.Skipped++
			if len(snap.SkipReasons) < maxSkipReasons {
				snap.SkipReasons = append(snap.SkipReasons, fmt.Sprintf("g %#x: %s", p.gp, p.why))
			}
		case readOK:
			if seen[p.g.ID] {
				snap.Skipped++ // a goid twice: the list moved under the read
				continue
			}
			seen[p.g.ID] = true
			snap.Goroutines = append(snap.Goroutines, p.g)
		}
	}
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// sameG reports whether the fields a goroutine's report rests on are the
// same in two reads of its g.
func sameG(l *Layout, a, b []byte) bool {
	if binary.LittleEndian.Uint32(a[l.GAtomicStatus:]) != binary.LittleEndian.Uint32(b[l.GAtomicStatus:]) {
		return false
	}
	for _, o := range []int{l.GGoid, l.GSchedPC, l.GSchedSP, l.GSyscallSP, l.GStackLo, l.GStackHi} {
		if le64(a[o:]) != le64(b[o:]) {
			return false
		}
	}
	return true
}

// parse decodes one g and checks it.
func (r *reader) parse(p *pending) {
	l := r.rt.Layout
	b := p.b
	torn := func(why string) { p.kind, p.why = readTorn, why }
	status := binary.LittleEndian.Uint32(b[l.GAtomicStatus:]) &^ gScan
	if int(status) >= len(l.Statuses) || l.Statuses[status] == "" {
		torn("unknown status")
		return
	}
	name := l.Statuses[status]
	switch name {
	case "dead", "idle", "waiting for cgo callback":
		p.kind = readDead
		return
	}
	g := Goroutine{ID: le64(b[l.GGoid:]), Status: name, GoPC: le64(b[l.GGoPC:]), StartPC: le64(b[l.GStartPC:])}
	if g.ID == 0 || int64(g.ID) < 0 {
		torn("goid 0")
		return
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
		p.kind = readSystem
		return
	}
	if g.GoPC != 0 {
		if fn, ok := r.rt.pcln.funcAt(g.GoPC - 1); ok {
			g.GoPCFunc = fn.name
		}
	}
	lo, hi := le64(b[l.GStackLo:]), le64(b[l.GStackHi:])
	if lo == 0 || lo >= hi || hi-lo > maxStack {
		torn("bad stack bounds")
		return
	}
	if g.OnThread() {
		if m := le64(b[l.GM:]); m != 0 {
			if id, err := readWord(r.rt.mem, m+uint64(l.MProcID)); err == nil && id > 0 && id < 1<<31 {
				g.ThreadID = int(id)
			}
		}
	}
	g.StackLo, g.StackHi = lo, hi
	pc, sp := le64(b[l.GSchedPC:]), le64(b[l.GSchedSP:])
	switch {
	case name == statusRunning:
		// The runtime clears sched.sp when it resumes a goroutine and
		// sets it when the goroutine's thread goes to the system stack
		// (systemstack, mcall): then the goroutine's own frames stand
		// still from sched, and are walked.
		if sp == 0 || sp < lo || sp > hi {
			p.g = g
			return
		}
	case name == statusSyscall:
		if ssp := le64(b[l.GSyscallSP:]); ssp != 0 {
			pc, sp = le64(b[l.GSyscallPC:]), ssp
		}
	}
	if sp < lo || sp > hi {
		torn("saved SP outside its stack")
		return
	}
	p.walk, p.pc, p.sp, p.hi = true, pc, sp, hi
	p.g = g
}

// ShownFuncs is Funcs without the wrappers the runtime's traceback
// hides (Wrappers): its physical frames as runtime.Stack names them.
func (g *Goroutine) ShownFuncs() []string {
	if len(g.Wrappers) == 0 {
		return g.Funcs
	}
	out := make([]string, 0, len(g.Funcs))
	for i, f := range g.Funcs {
		if !slices.Contains(g.Wrappers, i) {
			out = append(out, f)
		}
	}
	return out
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

// walkStack unwinds a goroutine's stack from its saved pc and sp with the
// frame sizes of the pclntab (the runtime's unwinder on amd64: the
// caller's SP is SP plus the frame size plus the return address), over
// the copy of the stack's top read with the block, and the whole stack
// (bounded) when the walk goes deeper. It returns why the walk is not
// consistent, "" when it is; a stack deeper than a walk goes is cut
// short (Goroutine.Cut), not failed.
func (r *reader) walkStack(pd *pending) string {
	p := r.rt.pcln
	g := &pd.g
	pc, sp, hi := pd.pc, pd.sp, pd.hi
	st, base := pd.st, pd.sp
	if !pd.stOK {
		st = nil
	}
	callee := ""
	for steps := 0; steps < maxFrames; steps++ {
		fn, ok := p.funcAt(pc)
		if !ok {
			return fmt.Sprintf("pc %#x is not in Go code (%s, after %s)", pc, g.Status, strings.Join(g.Funcs, " < "))
		}
		// Wrappers are left out as the runtime's tracebacks do, unless
		// they called a panic instead of what they wrap; what was inlined
		// into one stays (stackNamer drops the wrapper's own frame).
		if fn.wrapper && !elideNot[callee] {
			g.Wrappers = append(g.Wrappers, len(g.PCs))
		}
		g.PCs = append(g.PCs, pc)
		g.Funcs = append(g.Funcs, fn.name)
		callee = fn.name
		if rootFuncs[fn.name] {
			return ""
		}
		d, ok := p.spDelta(fn, pc)
		if !ok {
			return fmt.Sprintf("no frame size for %s at %#x", fn.name, pc)
		}
		fp := sp + uint64(d) + 8
		if fp > hi || fp-8 < base {
			return fmt.Sprintf("frame of %s leaves the stack", fn.name)
		}
		if fp-base > uint64(len(st)) {
			// Beyond the copy: read the whole stack once (bounded).
			n := min(hi-base, maxStackRead)
			if fp-base > n || uint64(len(st)) >= n {
				g.Cut = fmt.Sprintf("stack cut short: deeper than %d bytes", maxStackRead)
				return ""
			}
			r.stack = grow(r.stack, int(n))
			if readFull(r.rt.mem, r.stack, base) != nil {
				return "stack unreadable"
			}
			st = r.stack
		}
		ret := le64(st[fp-8-base:])
		if ret == 0 {
			return fmt.Sprintf("return address 0 above %s, short of runtime.goexit", fn.name)
		}
		pc, sp = ret, fp
	}
	g.Cut = fmt.Sprintf("stack cut short: more than %d frames", maxFrames)
	return ""
}

// readRanges reads bufs[i] at addrs[i], through one vectored read when
// the memory offers it; ok[i] says whether bufs[i] was read whole.
func readRanges(mem io.ReaderAt, bufs [][]byte, addrs []uint64) []bool {
	if rr, yes := mem.(RangeReader); yes {
		return rr.ReadRanges(bufs, addrs)
	}
	ok := make([]bool, len(bufs))
	for i := range bufs {
		ok[i] = readFull(mem, bufs[i], addrs[i]) == nil
	}
	return ok
}

// RangeReader is memory that reads many ranges in one call (a live
// process: process_vm_readv with many iovecs). ok[i] says whether bufs[i]
// was read whole.
type RangeReader interface {
	ReadRanges(bufs [][]byte, addrs []uint64) (ok []bool)
}
