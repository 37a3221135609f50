package unwind

// maxGoSwitchFrame bounds the frame searched for below the frame pointer a
// Go stack switch leaves in RBP.
const maxGoSwitchFrame = 64 << 10

// goStep unwinds a Go frame by its exact frame size from the pclntab: the
// return address sits at SP+size, and the caller's RBP is the saved one
// when RBP points at this frame's record (CFA-16), else RBP is unchanged
// (Go code keeps it).
//
// A root function (runtime.goexit, mstart, rt0_go) ends the walk. A
// function that switched stacks (systemstack, mcall, asmcgocall,
// morestack) and is not the innermost frame continues on the stack its
// frame pointer points into.
func (w *walker) goStep(entry, size uint64, root, switches bool) (Frame, StopReason) {
	if root && !w.signalHandlerRoot(size) {
		return Frame{}, StopEnd
	}
	if switches {
		return w.goSwitchStep(entry)
	}
	sp := w.regs.V[RegRSP]
	cfa := sp + size + 8
	if cfa < sp {
		return Frame{}, StopNoProgress
	}
	if w.hi != 0 && cfa > w.hi {
		return Frame{}, StopLeftStack
	}
	ret, ok := w.read64(cfa - 8)
	if !ok {
		return Frame{}, StopStackCopy
	}
	var nr Regs
	nr.V = w.regs.V
	nr.Known = w.regs.Known & calleeSavedMask
	if rbp, ok := w.regs.Get(RegRBP); ok && rbp == cfa-16 {
		if v, ok := w.read64(rbp); ok {
			nr.Set(RegRBP, v)
		} else {
			nr.Forget(RegRBP)
		}
	}
	nr.Set(RegRIP, ret)
	nr.Set(RegRSP, cfa)
	return w.accept(&nr, MethodPclntab)
}

// signalHandlerRoot reports whether a root function (one the runtime
// marks as starting a stack) returns to the sigreturn trampoline: Go's
// signal handler entry, runtime.sigtramp, is such a root, yet the thread
// it runs on goes on below its signal frame to the code the signal
// interrupted. size is the function's frame size at the PC.
func (w *walker) signalHandlerRoot(size uint64) bool {
	slot := w.regs.V[RegRSP] + size
	if slot < w.regs.V[RegRSP] || w.hi != 0 && slot+8 > w.hi {
		return false
	}
	ret, ok := w.read64(slot)
	return ok && w.isTrampoline(ret, false)
}

// goSwitchStep finds the caller of a Go function that switched stacks.
// The runtime keeps the goroutine's frame pointer in RBP across the
// switch (systemstack, asmcgocall); mcall clears it (nothing lies beyond).
// The caller F's frame record is at RBP: F's return-address slot for the
// call into the switching function (entered at entry) lies below it, at
// RBP-s where s is F's frame size at that return address. A slot that
// satisfies this, whose call directly targets entry, on the stack RBP
// points into, is F's exact frame; else the frame record itself gives F's
// caller.
func (w *walker) goSwitchStep(entry uint64) (Frame, StopReason) {
	rbp, ok := w.regs.Get(RegRBP)
	if !ok || rbp == 0 {
		return Frame{}, StopEnd
	}
	if rbp&7 != 0 {
		return Frame{}, StopLeftStack
	}
	lo, hi := w.lo, w.hi
	if w.hi == 0 || rbp < w.lo || rbp+16 > w.hi {
		mi, ok := w.lookup(rbp)
		if !ok || mi.Exec || rbp+16 > mi.End {
			return Frame{}, StopLeftStack
		}
		lo, hi = mi.Start, mi.End
	}
	callee := w.calleePC()
	for a := rbp - 8; a >= lo && rbp-a <= maxGoSwitchFrame && w.budget > 0; a -= 8 {
		w.budget--
		v, ok := w.read64(a)
		if !ok {
			break
		}
		mi, ok := w.lookup(v - 1)
		if !ok || !mi.Exec || mi.Go == nil || v-1 < mi.Bias {
			continue
		}
		// F itself switches no stack (the switching function's own
		// return addresses, of calls it makes before switching, lie there
		// too).
		_, size, _, sw, ok := mi.Go.FrameSize(v - 1 - mi.Bias)
		if !ok || sw || a+size != rbp {
			continue
		}
		if r, target := w.returnAddressTarget(v, callee); r != raVerified || target != entry {
			continue
		}
		if lo == w.lo && hi == w.hi && a+8 <= w.regs.V[RegRSP] {
			break // on the same stack, the caller lies above
		}
		var nr Regs
		nr.V = w.regs.V
		nr.Known = w.regs.Known & calleeSavedMask
		nr.Set(RegRIP, v)
		nr.Set(RegRSP, a+8)
		return w.acceptSwitch(&nr, MethodPclntab, lo, hi)
	}
	return w.fpStep(rbp, MethodFP)
}
