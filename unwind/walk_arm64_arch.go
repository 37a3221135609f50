package unwind

import "encoding/binary"

// The aarch64 walk (walk, with stepARM64): each caller is found by the
// module's CFI (after the sigreturn trampoline's saved context), else by
// the frame record x29 points at, else, for frame 0 alone, by the link
// register of a leaf that has not saved it. Return addresses lose their
// pointer-authentication bits (Input.PACMask) before they are used.
// There is no stack scanning on arm64: a frame record chain is what
// code without CFI leaves.

// stepARM64 finds the caller of the current frame cur.
func (w *walker) stepARM64(cur *Frame, frame0 bool) (Frame, StopReason) {
	pc := w.regs.V[A64PC]
	w.exact = cur.Exact
	if w.isTrampolineARM64(pc, cur.Exact) {
		return w.signalStepARM64(cur)
	}
	look := pc
	if !cur.Exact && pc > 0 {
		look = pc - 1
	}
	mi, inMap := w.lookup(look)
	var rs *ruleSet
	var src *Table
	if inMap && mi.CFI != nil && look >= mi.Bias {
		rs, _, src = w.rowAt(mi.CFI, look-mi.Bias)
	}
	// Go code by its pclntab, CFI or not: Go's CFI on arm64 says nothing
	// of x29, which the pclntab's frame layout restores (and a stack
	// switch follows), and nothing right at a root (runtime.sigtramp goes
	// on to its signal frame).
	if inMap && mi.Go != nil && look >= mi.Bias {
		if _, size, root, sw, ok := mi.Go.FrameSize(look - mi.Bias); ok {
			return w.goStepARM64(size, root, sw && !cur.Exact, cur.Exact)
		}
	}
	if rs != nil {
		if rs.Signal {
			return w.signalStepARM64(cur)
		}
		f, stop := w.cfiStepARM64(rs, src)
		if stop == StopNone || stop == StopEnd {
			return f, stop
		}
		if f2, stop2 := w.recordStepARM64(); stop2 == StopNone {
			return f2, stop2
		}
		return f, stop
	}
	if !inMap || !mi.Exec {
		if !frame0 {
			return Frame{}, StopNotExec
		}
	} else if mi.NoModule {
		return Frame{}, StopNoModule
	}
	if frame0 && cur.Exact {
		if f, stop := w.leafStepARM64(); stop == StopNone {
			return f, stop
		}
	}
	return w.recordStepARM64()
}

// cfiStepARM64 applies a CFI row: the caller's PC is the link register's
// rule (unset: the link register itself, a leaf's), its SP the CFA.
func (w *walker) cfiStepARM64(rs *ruleSet, t *Table) (Frame, StopReason) {
	cfa, err := w.cfa(rs.CFA, t)
	if err != nil {
		return Frame{}, exprStop(err)
	}
	if cfa < w.regs.V[A64SP] {
		return Frame{}, StopNoProgress
	}
	if w.hi != 0 && (cfa < w.lo || cfa > w.hi) {
		return Frame{}, StopLeftStack
	}
	if rs.Regs[A64LR].Kind == RuleUndefined {
		return Frame{}, StopEnd
	}
	var nr Regs
	nr.V = w.regs.V
	nr.Known = w.regs.Known & a64CalleeSaved
	if stop := w.applyRules(rs, t, cfa, A64SP, A64LR, &nr); stop != StopNone {
		return Frame{}, stop
	}
	ra, ok := nr.Get(A64LR)
	if !ok {
		return Frame{}, StopUnknownReg
	}
	ra &^= w.pacMask
	nr.Set(A64LR, ra)
	nr.Set(A64PC, ra)
	nr.Set(A64SP, cfa)
	return w.acceptARM64(&nr, MethodCFI)
}

// leafStepARM64 takes frame 0's link register as its return address when
// the function has not saved it: the frame record x29 points at (its
// caller's) holds another return address, and the instruction before the
// link register's address is a call.
func (w *walker) leafStepARM64() (Frame, StopReason) {
	lr, ok := w.regs.Get(A64LR)
	if !ok {
		return Frame{}, StopUnknownReg
	}
	lr &^= w.pacMask
	if fp, ok := w.regs.Get(A64FP); ok && fp != 0 {
		if saved, ok := w.read64(fp + 8); ok && saved&^w.pacMask == lr {
			return Frame{}, StopNoUnwindInfo // a frame record of its own: recordStepARM64 takes it
		}
	}
	var b [4]byte
	if lr < 4 {
		return Frame{}, StopNoUnwindInfo
	}
	if n, _ := w.in.Space.ReadCode(b[:], lr-4); n != 4 || !isCallBeforeARM64(b[:]) {
		return Frame{}, StopNoUnwindInfo
	}
	nr := w.regs
	nr.Known &= a64CalleeSaved | 1<<A64SP
	nr.Set(A64PC, lr)
	return w.acceptARM64(&nr, MethodFP)
}

// recordStepARM64 follows the frame record at x29: {previous x29, return
// address}. The caller's SP is taken as the record's end, the least it
// can be.
func (w *walker) recordStepARM64() (Frame, StopReason) {
	fp, ok := w.regs.Get(A64FP)
	if !ok {
		return Frame{}, StopUnknownReg
	}
	if fp == 0 {
		return Frame{}, StopEnd // the chain's terminator
	}
	if fp < w.regs.V[A64SP] || fp&7 != 0 || w.hi != 0 && fp+16 > w.hi {
		return Frame{}, StopNoUnwindInfo
	}
	next, ok1 := w.read64(fp)
	ret, ok2 := w.read64(fp + 8)
	if !ok1 || !ok2 {
		return Frame{}, StopStackCopy
	}
	ret &^= w.pacMask
	var nr Regs
	if next == 0 || next > fp {
		nr.Set(A64FP, next)
	}
	nr.Set(A64LR, ret)
	nr.Set(A64PC, ret)
	nr.Set(A64SP, fp+16)
	return w.acceptARM64(&nr, MethodFP)
}

// acceptARM64 validates a caller's registers and makes them current.
func (w *walker) acceptARM64(nr *Regs, m Method) (Frame, StopReason) {
	pc, sp := nr.V[A64PC], nr.V[A64SP]
	if pc == 0 {
		return Frame{}, StopPCZero
	}
	if cur := w.regs.V[A64SP]; sp < cur || (sp == cur && pc == w.regs.V[A64PC]) {
		return Frame{}, StopNoProgress
	}
	if w.hi != 0 && (sp < w.lo || sp > w.hi) {
		return Frame{}, StopLeftStack
	}
	// (a sigreturn trampoline may start its mapping: pc-1 is another's)
	if mi, ok := w.lookup(pc - 1); (!ok || !mi.Exec) && !w.isTrampolineARM64(pc, false) {
		return Frame{}, StopNotExec
	}
	w.regs = *nr
	return Frame{PC: pc, SP: sp, Method: m}, StopNone
}

// isTrampolineARM64 reports whether pc is the sigreturn trampoline's
// start (a return address) or, for an exact PC, its svc.
func (w *walker) isTrampolineARM64(pc uint64, exact bool) bool {
	t := a64SigreturnTrampoline[:]
	b := w.code[:len(t)]
	if n, _ := w.in.Space.ReadCode(b, pc); n == len(t) && string(b) == string(t) {
		return true
	}
	if exact && pc >= 4 {
		if n, _ := w.in.Space.ReadCode(b, pc-4); n == len(t) && string(b) == string(t) {
			return true
		}
	}
	return false
}

// signalStepARM64 restores the interrupted context from the rt_sigframe
// at SP: cur becomes the signal frame, the returned frame is the one the
// signal interrupted (exact PC).
func (w *walker) signalStepARM64(cur *Frame) (Frame, StopReason) {
	sp := w.regs.V[A64SP]
	var b [a64SigcontextSize]byte
	if !w.readBytes(b[:], sp+a64SigcontextRegs) {
		return Frame{}, StopStackCopy
	}
	var nr Regs
	for dw := uint64(0); dw <= 31; dw++ {
		if s := arm64Slot(dw); s < NumRegs {
			nr.Set(int(s), binary.LittleEndian.Uint64(b[dw*8:]))
		}
	}
	newPC, newSP := binary.LittleEndian.Uint64(b[32*8:]), nr.V[A64SP]
	nr.Set(A64PC, newPC)
	cur.SignalFrame = true
	cur.Method = MethodSignal
	if newPC == w.regs.V[A64PC] && newSP == sp {
		return Frame{}, StopNoProgress
	}
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

// goStepARM64 unwinds a Go frame by its frame size from the pclntab.
// Go on arm64 saves the link register at the bottom of the frame it
// allocates ([SP]) and its frame pointer just below ([SP-8], x29 pointing
// there); the caller's SP is SP+size. A function with no frame at pc (a
// leaf, or its entry) still has its return address in the link register,
// known for an exact frame only. A root ends the walk unless its return
// address is the sigreturn trampoline (runtime.sigtramp); a function that
// switched stacks goes on by its own frame record, which x29 still points
// at on the stack it left (goSwitchStepARM64).
func (w *walker) goStepARM64(size uint64, root, switches, exact bool) (Frame, StopReason) {
	sp := w.regs.V[A64SP]
	ret, ok := w.goReturnARM64(sp, size, exact)
	if root && !(ok && w.isTrampolineARM64(ret, false)) {
		return Frame{}, StopEnd
	}
	if switches {
		return w.goSwitchStepARM64(size)
	}
	if !ok {
		return Frame{}, StopStackCopy
	}
	cfa := sp + size
	if cfa < sp {
		return Frame{}, StopNoProgress
	}
	if w.hi != 0 && cfa > w.hi {
		return Frame{}, StopLeftStack
	}
	var nr Regs
	nr.V = w.regs.V
	nr.Known = w.regs.Known & a64CalleeSaved
	if fp, ok := w.regs.Get(A64FP); ok && size > 0 && fp == sp-8 {
		if v, ok := w.read64(fp); ok {
			nr.Set(A64FP, v)
		} else {
			nr.Forget(A64FP)
		}
	}
	nr.Set(A64LR, ret)
	nr.Set(A64PC, ret)
	nr.Set(A64SP, cfa)
	return w.acceptARM64(&nr, MethodPclntab)
}

// goReturnARM64 is a Go frame's return address: at [SP] when it has a
// frame, else the link register (an exact frame's).
func (w *walker) goReturnARM64(sp, size uint64, exact bool) (uint64, bool) {
	if size == 0 {
		if !exact {
			return 0, false
		}
		lr, ok := w.regs.Get(A64LR)
		return lr &^ w.pacMask, ok
	}
	if w.hi != 0 && sp+8 > w.hi {
		return 0, false
	}
	v, ok := w.read64(sp)
	return v &^ w.pacMask, ok
}

// goSwitchStepARM64 finds the caller of a Go function that switched stacks
// (systemstack, asmcgocall) with a frame of size bytes: the runtime keeps
// x29 at that function's frame record, on the stack it switched from,
// 8 bytes below its SP there ({caller's x29, return address into the
// caller}); the caller's SP is that SP+size. mcall leaves nothing (x29 0).
func (w *walker) goSwitchStepARM64(size uint64) (Frame, StopReason) {
	fp, ok := w.regs.Get(A64FP)
	if !ok || fp == 0 || size == 0 {
		return Frame{}, StopEnd
	}
	if fp&7 != 0 {
		return Frame{}, StopLeftStack
	}
	mi, ok := w.lookup(fp)
	if !ok || mi.Exec || fp+16 > mi.End {
		return Frame{}, StopLeftStack
	}
	next, ok1 := w.read64(fp)
	ret, ok2 := w.read64(fp + 8)
	if !ok1 || !ok2 {
		return Frame{}, StopStackCopy
	}
	sp := fp + 8 + size
	if sp < fp || sp > mi.End {
		return Frame{}, StopLeftStack
	}
	ret &^= w.pacMask
	if ret == 0 {
		return Frame{}, StopPCZero
	}
	if m, ok := w.lookup(ret - 1); !ok || !m.Exec {
		return Frame{}, StopNotExec
	}
	var nr Regs
	nr.Set(A64FP, next)
	nr.Set(A64LR, ret)
	nr.Set(A64PC, ret)
	nr.Set(A64SP, sp)
	w.lo, w.hi = mi.Start, mi.End
	w.regs = nr
	return Frame{PC: ret, SP: sp, Method: MethodPclntab}, StopNone
}
