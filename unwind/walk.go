package unwind

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"stackshot/internal/contain"
	"sync"
)

// DefaultMaxFrames is the depth at which a walk stops unless told
// otherwise: the one default for every caller (resolve, the command's
// --max-frames).
const DefaultMaxFrames = 1024

const (
	maxScanWords   = 2048 // stack scanning: words examined per frame (16 KiB)
	maxRecordWords = 4096 // fp-heuristic: words examined for a frame record (32 KiB)
	maxFuncSize    = 1 << 20
	scanBudget     = 1 << 16 // words examined by scanning and the fp-heuristic per walk
)

// walker is the state of one Unwind call. Walkers are pooled so that a warm
// unwind allocates nothing.
type walker struct {
	in     *Input
	regs   Regs
	lo, hi uint64 // stack mapping bounds, 0,0 if unknown
	buf    [SigcontextSize]byte
	code   [16]byte
	exact  bool // the current frame's PC is exact
	// The last mapping Space.Lookup returned: consecutive frames are
	// mostly in the same module.
	mi      ModuleInfo
	miValid bool
	budget  int // words scanning may still examine in this walk
	// Memos of this walk (entries of another walk have another gen): a
	// deep recursion repeats the same return address, so the same CFI row
	// and the same call-site checks, frame after frame.
	gen  uint64
	rows [8]rowMemo
	ras  [16]raMemo
	// The return address whose step last went by CFI, and its row: a
	// recursion's next frame has the same, and step's choice depends on
	// nothing else (nil: none in this walk).
	cfiPC  uint64
	cfiRS  *ruleSet
	cfiSrc *Table
	// arm64: the walk is of an aarch64 thread (walkARM64); pacMask is
	// the pointer-authentication bits cleared from its return addresses.
	arm64   bool
	pacMask uint64
}

type rowMemo struct {
	gen   uint64
	t     *Table
	vaddr uint64
	rs    *ruleSet
	end   uint64
	src   *Table
}

type raMemo struct {
	gen               uint64
	v, callee, target uint64
	strength          int
}

// memoSlot picks a memo entry for a pair of addresses (n a power of 2).
func memoSlot(a, b uint64, n int) int {
	return int(((a ^ b*31) * 0x9e3779b97f4a7c15) >> 58 & uint64(n-1))
}

// rowAt is t.rowAt with the walk's memo.
func (w *walker) rowAt(t *Table, vaddr uint64) (*ruleSet, uint64, *Table) {
	m := &w.rows[memoSlot(vaddr, 0, len(w.rows))]
	if m.gen == w.gen && m.t == t && m.vaddr == vaddr {
		return m.rs, m.end, m.src
	}
	rs, _, end, src := t.rowAt(vaddr)
	*m = rowMemo{gen: w.gen, t: t, vaddr: vaddr, rs: rs, end: end, src: src}
	return rs, end, src
}

// lookup is Space.Lookup with a one-entry cache.
func (w *walker) lookup(addr uint64) (ModuleInfo, bool) {
	if w.miValid && addr >= w.mi.Start && addr < w.mi.End {
		return w.mi, true
	}
	mi, ok := w.in.Space.Lookup(addr)
	if ok && addr >= mi.Start && addr < mi.End {
		w.mi, w.miValid = mi, true
	}
	return mi, ok
}

var walkerPool = sync.Pool{New: func() any { return new(walker) }}

// Unwind walks the stack described by in and appends one frame per physical
// frame to out, frame 0 first (the registers' PC, Method MethodRegs, Exact).
// Each caller is found by, in order: the module's compiled CFI (looked up at
// PC-1 except for exact frames), the signal trampoline's saved context, a
// validated frame-pointer chain, and stack scanning; when a rule needs a
// register the capture does not know (a partial capture at a syscall), the
// frame-pointer heuristic recovers RBP from a frame record on the stack.
// It returns the extended slice and why the walk ended; it never fails.
//
// A panic in the walk (a bug met on hostile stack bytes or CFI) costs this
// thread its frames past the first: the walk ends with StopFault.
func Unwind(in *Input, out []Frame) (frames []Frame, stop StopReason) {
	n := len(out)
	err := contain.Do("unwind", func() error {
		frames, stop = walk(in, out)
		return nil
	})
	if err == nil {
		return frames, stop
	}
	out = out[:n]
	pcReg, spReg := archRegs(in.Arch)
	if pc, ok := in.Regs.Get(pcReg); ok {
		sp, _ := in.Regs.Get(spReg)
		out = append(out, Frame{PC: pc, SP: sp, Method: MethodRegs, Exact: true})
	}
	return out, StopFault
}

// archRegs are the slots of the PC and the stack pointer in a's Regs.
func archRegs(a Arch) (pc, sp int) {
	if a == ArchARM64 {
		return A64PC, A64SP
	}
	return RegRIP, RegRSP
}

func walk(in *Input, out []Frame) ([]Frame, StopReason) {
	max := in.MaxFrames
	if max <= 0 {
		max = DefaultMaxFrames
	}
	pcReg, spReg := archRegs(in.Arch)
	pc, ok := in.Regs.Get(pcReg)
	if !ok {
		return out, StopUnknownReg
	}
	sp, ok := in.Regs.Get(spReg)
	out = append(out, Frame{PC: pc, SP: sp, Method: MethodRegs, Exact: true})
	if !ok {
		return out, StopUnknownReg
	}
	if in.Space == nil {
		return out, StopNoUnwindInfo
	}
	w := walkerPool.Get().(*walker)
	defer walkerPool.Put(w)
	w.in = in
	w.arm64 = in.Arch == ArchARM64
	if w.arm64 { // (see walk_arm64_arch.go)
		w.pacMask = in.PACMask
		if w.pacMask == 0 {
			w.pacMask = a64DefaultPACMask
		}
	}
	w.miValid = false
	w.gen++ // (a pooled walker's memos are another walk's)
	w.cfiPC, w.cfiRS, w.cfiSrc = 0, nil, nil
	w.budget = scanBudget
	w.regs = in.Regs
	w.lo, w.hi = in.StackLo, in.StackHi
	first := len(out) - 1
	for {
		if len(out)-first >= max {
			w.in = nil
			return out, StopMaxFrames
		}
		var f Frame
		var stop StopReason
		if w.arm64 { // (direct calls: the x86-64 walk's own cost is unchanged)
			f, stop = w.stepARM64(&out[len(out)-1], len(out)-1 == first)
		} else {
			f, stop = w.step(&out[len(out)-1], len(out)-1 == first)
		}
		if stop != StopNone {
			w.in = nil
			return out, stop
		}
		if len(out) == cap(out) && len(out)-first >= growAfter {
			out = w.grow(out, first, max, f.SP)
		}
		out = append(out, f)
	}
}

// growAfter is the depth from which a walk sizes its frames from the
// stack (grow); shallower walks grow as append does.
const growAfter = 16

// grow makes room in out for the frames the rest of the stack likely
// holds: as many per byte as the frames so far (out[first:], the next at
// sp), up to max. append's own growth (by a quarter past 256 entries)
// allocates about three times a deep walk's frames, all of it fresh
// memory to fault in for a one-off dump.
func (w *walker) grow(out []Frame, first, max int, sp uint64) []Frame {
	n := len(out) - first
	want := 2 * n
	top := w.hi
	if s := &w.in.Stack; top == 0 {
		top = s.Addr + uint64(len(s.Data))
	}
	if sp0 := out[first].SP; sp > sp0 && top > sp {
		if r := (top - sp0) / (sp - sp0); r >= uint64(max/n) {
			want = max
		} else {
			want = n * (int(r) + 1)
		}
	}
	want = min(want, max)
	if want <= n {
		want = n + 1
	}
	return append(make([]Frame, 0, first+want), out...)
}

// read64 reads a word from the stack copy, or through Mem outside it.
func (w *walker) read64(addr uint64) (uint64, bool) {
	s := &w.in.Stack
	if addr >= s.Addr && addr-s.Addr <= uint64(len(s.Data)) && uint64(len(s.Data))-(addr-s.Addr) >= 8 {
		return binary.LittleEndian.Uint64(s.Data[addr-s.Addr:]), true
	}
	if w.in.Mem == nil {
		return 0, false
	}
	b := w.buf[:8]
	if n, err := w.in.Mem.ReadMemory(b, addr); n < 8 || (err != nil && n < 8) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b), true
}

// readBytes fills p from the stack copy or Mem.
func (w *walker) readBytes(p []byte, addr uint64) bool {
	s := &w.in.Stack
	if addr >= s.Addr && addr-s.Addr <= uint64(len(s.Data)) && uint64(len(s.Data))-(addr-s.Addr) >= uint64(len(p)) {
		copy(p, s.Data[addr-s.Addr:])
		return true
	}
	if w.in.Mem == nil {
		return false
	}
	n, _ := w.in.Mem.ReadMemory(p, addr)
	return n == len(p)
}

// reg and readMem make the walker an exprEnv.
func (w *walker) reg(n int) (uint64, bool) {
	if w.arm64 {
		n = int(arm64Slot(uint64(n)))
	}
	return w.regs.Get(n)
}

func (w *walker) readMem(addr uint64, size int) (uint64, bool) {
	if size == 8 {
		return w.read64(addr)
	}
	var tmp [8]byte
	b := w.code[:size]
	if !w.readBytes(b, addr) {
		return 0, false
	}
	copy(tmp[:], b)
	return binary.LittleEndian.Uint64(tmp[:]), true
}

// step finds the caller of the current frame cur (whose registers are
// w.regs).
func (w *walker) step(cur *Frame, frame0 bool) (Frame, StopReason) {
	exact := cur.Exact
	w.exact = exact
	pc := w.regs.V[RegRIP]
	if !exact && pc == w.cfiPC && w.cfiRS != nil {
		// What follows chose CFI and this row for this return address:
		// it would again (lookups, rows, Go's table and the code at pc
		// are the same for the walk).
		return w.cfiStep(w.cfiRS, w.cfiSrc)
	}
	look := pc
	if !exact && pc > 0 {
		look = pc - 1
	}
	mi, inMap := w.lookup(look)
	var rs *ruleSet
	var src *Table // the table rs's expressions are in
	atEnd := false // the row ends right at the return address
	if inMap && mi.CFI != nil && look >= mi.Bias {
		var end uint64
		rs, end, src = w.rowAt(mi.CFI, look-mi.Bias)
		atEnd = rs != nil && !exact && end != ^uint64(0) && end == look-mi.Bias+1
	}
	// Go code's frame from its pclntab.
	var goEntry, goSize uint64
	var goRoot, goSwitch, goOK, inGoFunc bool
	if inMap && mi.Go != nil && look >= mi.Bias {
		goEntry, goSize, goRoot, goSwitch, goOK = mi.Go.FrameSize(look - mi.Bias)
		// A return address inside the Go function whose call it follows
		// is no trampoline's start: no code to read for it.
		if goOK && !exact {
			e, _, _, _, ok := mi.Go.FrameSize(pc - mi.Bias)
			inGoFunc = ok && e == goEntry
		}
	}
	if inMap && mi.JIT != nil && rs == nil {
		if jf, ok := mi.JIT.JITFrame(pc, exact); ok {
			return w.jitStep(cur, jf)
		}
	}
	// A trampoline without CFI of its own may follow another function's
	// FDE: then pc-1 finds that FDE, ending exactly at pc.
	if rs != nil && rs.Signal || (rs == nil || atEnd) && !inGoFunc && w.isTrampoline(pc, exact) {
		return w.signalStep(cur)
	}
	// Go code by its pclntab where there is no CFI, and where its CFI
	// cannot say the truth: a root, or a stack switch (Go's .debug_frame
	// leads from runtime.morestack to a stale word of the g0 stack).
	if goOK && (rs == nil || goRoot || goSwitch && !exact) {
		return w.goStep(goEntry+mi.Bias, goSize, goRoot, goSwitch && !exact)
	}
	if rs != nil {
		if !exact {
			w.cfiPC, w.cfiRS, w.cfiSrc = pc, rs, src
		}
		return w.cfiStep(rs, src)
	}
	wild := !inMap || !mi.Exec
	if wild && !frame0 {
		return Frame{}, StopNotExec
	}
	if inMap && mi.NoModule {
		return Frame{}, StopNoModule
	}
	return w.fallbackStep(wild)
}

// isTrampoline reports whether pc is the start of the sigreturn trampoline
// (a return address) or, for an exact PC, inside it.
func (w *walker) isTrampoline(pc uint64, exact bool) bool {
	t := SigreturnTrampoline[:]
	b := w.code[:len(t)]
	if n, _ := w.in.Space.ReadCode(b, pc); n == len(t) && string(b) == string(t) {
		return true
	}
	if exact && pc >= sigreturnSyscallOffset {
		if n, _ := w.in.Space.ReadCode(b, pc-sigreturnSyscallOffset); n == len(t) && string(b) == string(t) {
			return true
		}
	}
	return false
}

// signalStep restores the interrupted context from the rt_sigframe at SP:
// cur becomes the signal frame, and the returned frame is the one the signal
// interrupted (exact PC).
func (w *walker) signalStep(cur *Frame) (Frame, StopReason) {
	sp := w.regs.V[RegRSP]
	if !w.readBytes(w.buf[:], sp+SigcontextOffset) {
		return Frame{}, StopStackCopy
	}
	nr := RegsFromSigcontext(w.buf[:])
	cur.SignalFrame = true
	cur.Method = MethodSignal
	newPC, newSP := nr.V[RegRIP], nr.V[RegRSP]
	if newPC == w.regs.V[RegRIP] && newSP == sp {
		return Frame{}, StopNoProgress
	}
	// The handler may have run on an alternate stack: follow the
	// interrupted SP into its own mapping.
	if w.hi != 0 && (newSP < w.lo || newSP >= w.hi) {
		if mi, ok := w.lookup(newSP); ok && !mi.Exec {
			w.lo, w.hi = mi.Start, mi.End
		} else {
			w.lo, w.hi = 0, 0
		}
	}
	w.regs = nr
	return Frame{PC: newPC, SP: newSP, Method: MethodSignal, Exact: true}, StopNone
}

var errUnknownCFAReg = errors.New("cfa register unknown")

// cfa computes the CFA of the current frame under rule r.
func (w *walker) cfa(r Rule, t *Table) (uint64, error) {
	switch r.Kind {
	case RuleCFAReg:
		v, ok := w.regs.Get(int(r.Reg))
		if !ok {
			return 0, errUnknownCFAReg
		}
		return v + uint64(int64(r.Off)), nil
	case RuleCFAExpr:
		return evalExpr(t.expr(r.Off), w, false, 0, false, 0)
	}
	return 0, errBadRule
}

var errBadRule = errors.New("unsupported rule")

const calleeSavedMask = 1<<RegRBX | 1<<RegRBP | 1<<RegR12 | 1<<RegR13 | 1<<RegR14 | 1<<RegR15

// cfiStep applies a CFI row to find the caller.
func (w *walker) cfiStep(rs *ruleSet, t *Table) (Frame, StopReason) {
	method := MethodCFI
	cfa, err := w.cfa(rs.CFA, t)
	if err == errUnknownCFAReg && rs.CFA.Reg == RegRBP {
		// A frame-pointer function above a frame that did not save RBP,
		// captured without RBP: find its frame record on the stack.
		rec, ok := w.findFrameRecord(w.regs.V[RegRSP], false)
		if !ok {
			return Frame{}, StopUnknownReg
		}
		w.regs.Set(RegRBP, rec)
		method = MethodFPHeuristic
		cfa, err = w.cfa(rs.CFA, t)
	}
	if err != nil {
		return Frame{}, exprStop(err)
	}
	// The CFA lies above SP, except where the return address was moved
	// into a register and popped (glibc's __vfork: CFA = rsp, ra = rdi).
	if sp := w.regs.V[RegRSP]; cfa < sp || (cfa == sp && rs.Regs[RegRIP].Kind != RuleRegister) {
		return w.cfiFailed(StopNoProgress)
	}
	if w.hi != 0 && (cfa < w.lo || cfa > w.hi) {
		return w.cfiFailed(StopLeftStack)
	}
	switch rs.Regs[RegRIP].Kind {
	case RuleUnset, RuleUndefined:
		return Frame{}, StopEnd
	}
	// Callee-saved registers the CFI leaves unset keep their values;
	// caller-saved ones are unknown in the caller. Then every register
	// with a rule gets it.
	var nr Regs
	nr.V = w.regs.V
	nr.Known = w.regs.Known & calleeSavedMask
	if stop := w.applyRules(rs, t, cfa, RegRSP, RegRIP, &nr); stop != StopNone {
		return Frame{}, stop
	}
	// CFI that says nothing about RBP in a function whose RBP points at
	// its own frame record (CFA-16) is frame-pointer code whose producer
	// omits the rule (Go's .debug_frame): the caller's RBP is the saved one.
	if rs.Regs[RegRBP].Kind == RuleUnset {
		if rbp, ok := w.regs.Get(RegRBP); ok && rbp == cfa-16 {
			if v, ok := w.read64(rbp); ok {
				nr.Set(RegRBP, v)
			}
		}
	}
	if _, ok := nr.Get(RegRIP); !ok {
		return Frame{}, StopUnknownReg
	}
	nr.Set(RegRSP, cfa)
	f, stop := w.accept(&nr, method)
	if stop == StopNotExec || stop == StopNoProgress || stop == StopLeftStack {
		return w.cfiFailed(stop)
	}
	return f, stop
}

// applyRules gives every register with a rule in rs its value in the
// caller (nr), the CFA being cfa; sp is the stack pointer's slot (the CFA
// is its value), ra the return address's. A rule that fails leaves its
// register unknown, except the return address's: then the walk stops.
func (w *walker) applyRules(rs *ruleSet, t *Table, cfa uint64, sp, ra int, nr *Regs) StopReason {
	for m := rs.Mask &^ (1 << uint(sp)); m != 0; m &= m - 1 {
		r := bits.TrailingZeros32(m)
		rule := rs.Regs[r]
		nr.Known &^= 1 << uint(r)
		switch rule.Kind {
		case RuleSame:
			if v, ok := w.regs.Get(r); ok {
				nr.Set(r, v)
			}
		case RuleOffset:
			if v, ok := w.read64(cfa + uint64(int64(rule.Off))); ok {
				nr.Set(r, v)
			} else if r == ra {
				return StopStackCopy
			}
		case RuleValOffset:
			nr.Set(r, cfa+uint64(int64(rule.Off)))
		case RuleRegister:
			if v, ok := w.regs.Get(int(rule.Reg)); ok {
				nr.Set(r, v)
			}
		case RuleExpr, RuleValExpr:
			v, err := evalExpr(t.expr(rule.Off), w, true, cfa, true, cfa)
			if err == nil && rule.Kind == RuleExpr {
				var ok bool
				if v, ok = w.read64(v); !ok {
					err = errExprMemory
				}
			}
			if err == nil {
				nr.Set(r, v)
			} else if r == ra {
				return exprStop(err)
			}
		}
	}
	return StopNone
}

// cfiFailed handles CFI that yields an impossible caller. CFI cannot
// describe a stack switch (Go's asmcgocall keeps the goroutine's frame
// pointer in RBP while C runs on the system stack): try the frame-pointer
// chain before giving up with stop.
func (w *walker) cfiFailed(stop StopReason) (Frame, StopReason) {
	if rbp, ok := w.regs.Get(RegRBP); ok && rbp != 0 {
		if f, stop2 := w.fpStep(rbp, MethodFP); stop2 == StopNone {
			return f, stop2
		}
	}
	return Frame{}, stop
}

func exprStop(err error) StopReason {
	switch err {
	case errExprUnknown, errUnknownCFAReg:
		return StopUnknownReg
	case errExprMemory:
		return StopStackCopy
	}
	return StopBadCFI
}

// accept validates a caller's registers and makes them current.
func (w *walker) accept(nr *Regs, m Method) (Frame, StopReason) {
	return w.acceptSwitch(nr, m, 0, 0)
}

// acceptSwitch is accept for a caller that may live on another stack: if
// hi != 0 the caller's SP must lie in [lo, hi], which become the bounds.
func (w *walker) acceptSwitch(nr *Regs, m Method, lo, hi uint64) (Frame, StopReason) {
	pc, sp := nr.V[RegRIP], nr.V[RegRSP]
	if pc == 0 {
		return Frame{}, StopPCZero
	}
	if hi != 0 {
		if sp < lo || sp > hi {
			return Frame{}, StopLeftStack
		}
	} else {
		// The caller's SP is above ours; equal only when the return
		// address was kept in a register (then the PC must differ).
		if cur := w.regs.V[RegRSP]; sp < cur || (sp == cur && pc == w.regs.V[RegRIP]) {
			return Frame{}, StopNoProgress
		}
		if w.hi != 0 && (sp < w.lo || sp > w.hi) {
			return Frame{}, StopLeftStack
		}
	}
	if mi, ok := w.lookup(pc - 1); !ok || !mi.Exec {
		return Frame{}, StopNotExec
	}
	if hi != 0 {
		w.lo, w.hi = lo, hi
	}
	w.regs = *nr
	return Frame{PC: pc, SP: sp, Method: m}, StopNone
}

// fallbackStep unwinds a frame without CFI: frame pointer, then the
// frame-pointer heuristic if RBP is unknown, then stack scanning.
//
// wild is set when frame 0's PC is outside executable code (a call through
// a bad pointer): then the word at SP is taken if it follows any call.
func (w *walker) fallbackStep(wild bool) (Frame, StopReason) {
	sp := w.regs.V[RegRSP]
	// An interrupted frameless leaf (Go's assembly syscall stubs): the word
	// at SP is a return address whose direct call entered this function.
	// Its caller keeps every callee-saved register, RBP included.
	if w.exact {
		if v, ok := w.read64(sp); ok && (w.returnAddress(v, w.calleePC()) == raVerified ||
			wild && w.returnAddress(v, 0) != raNone) {
			nr := w.regs
			nr.Known &= calleeSavedMask
			nr.Set(RegRIP, v)
			nr.Set(RegRSP, sp+8)
			if f, stop := w.accept(&nr, MethodScan); stop == StopNone {
				return f, stop
			}
		}
	}
	if rbp, ok := w.regs.Get(RegRBP); ok {
		if rbp == 0 {
			return Frame{}, StopEnd // the frame-pointer chain's terminator
		}
		if f, stop := w.fpStep(rbp, MethodFP); stop == StopNone {
			return f, stop
		}
	} else if rec, ok := w.findFrameRecord(sp, true); ok {
		// Code without CFI whose RBP is unknown: trust a frame record only
		// if its chain is consistent and its call provably entered this
		// function; otherwise scanning is the better guess.
		if f, stop := w.fpStep(rec, MethodFPHeuristic); stop == StopNone {
			return f, stop
		}
	}
	return w.scanStep()
}

// fpStep follows the frame record at rbp: [rbp] saved RBP, [rbp+8] return
// address.
//
// A record outside the current stack mapping is followed only into another
// readable, non-executable mapping (a goroutine stack below a cgo call, an
// alternate signal stack) and only if its return address follows a call.
func (w *walker) fpStep(rbp uint64, m Method) (Frame, StopReason) {
	sp := w.regs.V[RegRSP]
	if rbp&7 != 0 {
		return Frame{}, StopLeftStack
	}
	var swLo, swHi uint64
	if w.hi != 0 && (rbp < w.lo || rbp+16 > w.hi) {
		mi, ok := w.lookup(rbp)
		if !ok || mi.Exec || rbp+16 > mi.End {
			return Frame{}, StopLeftStack
		}
		swLo, swHi = mi.Start, mi.End
	} else if rbp < sp {
		return Frame{}, StopLeftStack
	}
	next, ok1 := w.read64(rbp)
	ret, ok2 := w.read64(rbp + 8)
	if !ok1 || !ok2 {
		return Frame{}, StopStackCopy
	}
	if swHi != 0 && !w.isReturnAddress(ret, 0) {
		return Frame{}, StopLeftStack
	}
	var nr Regs
	nr.Set(RegRIP, ret)
	nr.Set(RegRSP, rbp+16)
	// A caller that does not keep frame pointers leaves anything in RBP:
	// keep it only if it continues the chain upward.
	hi := w.hi
	if swHi != 0 {
		hi = swHi
	}
	if next == 0 || next > rbp && (hi == 0 || next < hi) {
		nr.Set(RegRBP, next)
	}
	return w.acceptSwitch(&nr, m, swLo, swHi)
}

// scanStep looks upward from SP for a word that is a return address: inside
// an executable mapping, right after a call instruction. A return address
// whose direct call provably entered the current function wins over an
// earlier one after an indirect call (which stale stack slots often are).
func (w *walker) scanStep() (Frame, StopReason) {
	sp := w.regs.V[RegRSP]
	callee := w.calleePC()
	a := (sp + 7) &^ 7
	var weak, weakAt uint64
	for i := 0; i < maxScanWords && w.budget > 0; i, a = i+1, a+8 {
		w.budget--
		if w.hi != 0 && a+8 > w.hi {
			break
		}
		v, ok := w.read64(a)
		if !ok {
			break
		}
		switch w.returnAddress(v, callee) {
		case raVerified:
			if f, stop := w.scanAccept(v, a); stop == StopNone {
				return f, stop
			}
		case raIndirect:
			if weak == 0 {
				weak, weakAt = v, a
			}
		}
	}
	if weak != 0 {
		if f, stop := w.scanAccept(weak, weakAt); stop == StopNone {
			return f, stop
		}
	}
	return Frame{}, StopNoUnwindInfo
}

func (w *walker) scanAccept(ret, at uint64) (Frame, StopReason) {
	var nr Regs
	nr.Set(RegRIP, ret)
	nr.Set(RegRSP, at+8)
	return w.accept(&nr, MethodScan)
}

// isReturnAddress reports whether v lies in an executable mapping and
// follows a call instruction. callee, if not 0, is a PC in the function the
// call must have entered: a direct call whose target is in callee's mapping
// must land at or before callee (within maxFuncSize), and one into another
// mapping must land on a PLT stub.
func (w *walker) isReturnAddress(v, callee uint64) bool {
	return w.returnAddress(v, callee) > 0
}

// Strength of a return-address candidate.
const (
	raNone     = iota
	raIndirect // follows a call whose target cannot be checked
	raVerified // follows a direct call whose target is consistent with callee
)

func (w *walker) returnAddress(v, callee uint64) int {
	r, _ := w.returnAddressTarget(v, callee)
	return r
}

// returnAddressTarget is returnAddress, also giving a direct call's
// target; its answers are kept for the walk (the frame-record search asks
// about every word of a deep stack, mostly the same return address).
func (w *walker) returnAddressTarget(v, callee uint64) (int, uint64) {
	// Two ways per set, the newest first: the frame-record search asks
	// about two keys in turn, which must not evict each other.
	set := w.ras[2*memoSlot(v, callee, len(w.ras)/2):][:2]
	for i := range set {
		if m := &set[i]; m.gen == w.gen && m.v == v && m.callee == callee {
			return m.strength, m.target
		}
	}
	r, target := w.checkReturnAddress(v, callee)
	set[1] = set[0]
	set[0] = raMemo{gen: w.gen, v: v, callee: callee, target: target, strength: r}
	return r, target
}

func (w *walker) checkReturnAddress(v, callee uint64) (int, uint64) {
	if v < maxCallLen {
		return raNone, 0
	}
	mi, ok := w.lookup(v - 1)
	if !ok || !mi.Exec {
		return raNone, 0
	}
	start := v - maxCallLen
	if start < mi.Start {
		start = mi.Start
	}
	b := w.code[:v-start]
	n, _ := w.in.Space.ReadCode(b, start)
	if n != len(b) {
		return raNone, 0
	}
	ok, direct, rel := decodeCallBefore(b)
	if !ok {
		return raNone, 0
	}
	if !direct || callee == 0 {
		return raIndirect, 0
	}
	target := v + uint64(int64(rel))
	cm, ok := w.lookup(callee)
	if ok && target >= cm.Start && target < cm.End {
		if target <= callee && callee-target < maxFuncSize {
			return raVerified, target
		}
		return raNone, 0
	}
	tm, ok := w.lookup(target)
	if !ok || !tm.Exec {
		return raNone, 0
	}
	code := w.code[:8]
	if n, _ := w.in.Space.ReadCode(code, target); n != len(code) || !isPLTStub(code) {
		return raNone, 0
	}
	return raVerified, target
}

// calleePC is a PC inside the current frame's function.
func (w *walker) calleePC() uint64 {
	pc := w.regs.V[RegRIP]
	if !w.exact && pc > 0 {
		pc--
	}
	return pc
}

// findFrameRecord scans upward from sp for a frame record (saved RBP, return
// address) whose return address follows a call and whose saved RBP points
// further up the stack at another such record. If no record has a
// consistent successor, the first plausible one is returned, unless strict
// is set: then only a consistent record whose call is verified counts.
func (w *walker) findFrameRecord(sp uint64, strict bool) (uint64, bool) {
	a := (sp + 7) &^ 7
	var fallback, consistent, best, bestTarget uint64
	found, haveConsistent, haveVerified := false, false, false
	// The words come straight from the stack copy where both lie in it
	// (read64 otherwise): the search may read every word of 32 KiB.
	data, base, hi := w.in.Stack.Data, w.in.Stack.Addr, w.hi
	budget := w.budget // (the loop's own: a field would be stored and reloaded per word)
	for i := 0; i < maxRecordWords && budget > 0; i, a = i+1, a+8 {
		budget--
		if hi != 0 && a+16 > hi {
			break
		}
		var saved, ret uint64
		if off := a - base; a >= base && off < uint64(len(data)) && uint64(len(data))-off >= 16 {
			saved, ret = binary.LittleEndian.Uint64(data[off:]), binary.LittleEndian.Uint64(data[off+8:])
		} else {
			var ok1, ok2 bool
			saved, ok1 = w.read64(a)
			ret, ok2 = w.read64(a + 8)
			if !ok1 || !ok2 {
				break
			}
		}
		if saved&7 != 0 || saved <= a+8 || (hi != 0 && saved+16 > hi) || saved-a > 1<<24 {
			continue
		}
		strength, target := w.returnAddressTarget(ret, w.calleePC())
		if strength == raNone || strict && strength != raVerified {
			continue
		}
		if haveVerified && (strength != raVerified || target <= bestTarget) {
			// Only a verified record with a nearer call target can change
			// the answer now (a deep recursion's stack is a thousand
			// records of the same call): no chain to check.
			continue
		}
		saved2, ok1 := w.read64(saved)
		ret2, ok2 := w.read64(saved + 8)
		if ok1 && ok2 && (saved2 == 0 || saved2 > saved+8) && w.isReturnAddress(ret2, ret-1) {
			// A record whose return address follows a direct call of
			// this very function wins; stale records of earlier calls
			// (left below the live one) chain just as consistently.
			// The true caller's call targets the entry of the function we
			// are in: of verified records, the one whose call target is
			// nearest below our PC (a stale call reached some other,
			// earlier function).
			if strength == raVerified {
				if !haveVerified || target > bestTarget {
					best, bestTarget, haveVerified = a, target, true
				}
				continue
			}
			if !haveConsistent {
				consistent, haveConsistent = a, true
			}
			continue
		}
		if !found && !strict {
			fallback, found = a, true
		}
	}
	w.budget = budget
	if haveVerified {
		return best, true
	}
	if haveConsistent {
		return consistent, true
	}
	return fallback, found
}
