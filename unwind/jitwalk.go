package unwind

// JITCode describes code a JIT compiler wrote at run time, which has
// neither CFI nor a file: the runtime that wrote it says how each of its
// frames is laid out (HotSpot's code blobs: the interpreter's frames by
// frame pointer, compiled methods and stubs by a fixed frame size).
type JITCode interface {
	// JITFrame describes the frame at pc (exact: the instruction being
	// executed, not a return address); false when the runtime cannot
	// say (the walk then goes on as for code without CFI).
	JITFrame(pc uint64, exact bool) (JITFrame, bool)
}

// JITLayout says how a JIT frame finds its caller.
type JITLayout uint8

const (
	// JITFramePointer: RBP points at the frame's record ([RBP] the
	// caller's RBP, [RBP+8] the return address).
	JITFramePointer JITLayout = iota + 1
	// JITFixedSize: the caller's SP is SP+Size; the return address is the
	// word below it, the caller's RBP the word below that.
	JITFixedSize
)

// JITFrame is one frame's layout.
type JITFrame struct {
	Layout JITLayout
	Size   uint64 // JITFixedSize: bytes from SP to the caller's SP
	// SenderSPSlot (JITFramePointer), when not 0, is the offset from RBP
	// of a slot holding the caller's SP before this frame's code moved it
	// (HotSpot's interpreter frames: a compiled caller's frame size counts
	// from there).
	SenderSPSlot int64
}

// maxJITExtension bounds how far above a frame record a caller's saved SP
// may lie (the arguments an adapter pushed in between).
const maxJITExtension = 1 << 20

// jitStep finds the caller of a JIT frame. Only RBP survives into the
// caller: JIT code keeps no other register for its callers.
func (w *walker) jitStep(cur *Frame, jf JITFrame) (Frame, StopReason) {
	sp := w.regs.V[RegRSP]
	var nr Regs
	switch jf.Layout {
	case JITFramePointer:
		rbp, ok := w.regs.Get(RegRBP)
		if !ok || rbp&7 != 0 || rbp < sp || w.hi != 0 && rbp+16 > w.hi {
			return Frame{}, StopLeftStack
		}
		next, ok1 := w.read64(rbp)
		ret, ok2 := w.read64(rbp + 8)
		if !ok1 || !ok2 {
			return Frame{}, StopStackCopy
		}
		cur.FP = rbp
		nsp := rbp + 16
		if jf.SenderSPSlot != 0 {
			if v, ok := w.read64(rbp + uint64(jf.SenderSPSlot)); ok && v >= nsp && v-nsp <= maxJITExtension && (w.hi == 0 || v <= w.hi) {
				nsp = v
			}
		}
		nr.Set(RegRIP, ret)
		nr.Set(RegRSP, nsp)
		nr.Set(RegRBP, next)
	case JITFixedSize:
		cfa := sp + jf.Size
		if jf.Size < 16 || cfa < sp {
			return Frame{}, StopNoProgress
		}
		if w.hi != 0 && cfa > w.hi {
			return Frame{}, StopLeftStack
		}
		ret, ok1 := w.read64(cfa - 8)
		rbp, ok2 := w.read64(cfa - 16)
		if !ok1 || !ok2 {
			return Frame{}, StopStackCopy
		}
		nr.Set(RegRIP, ret)
		nr.Set(RegRSP, cfa)
		nr.Set(RegRBP, rbp)
	default:
		return Frame{}, StopNoUnwindInfo
	}
	return w.accept(&nr, MethodJIT)
}
