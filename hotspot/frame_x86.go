package hotspot

// The x86-64 interpreter frame, below its saved RBP (frame_x86.hpp): the
// sender's SP, the last SP, then the Method*, its mirror, the method data
// pointer, the constant pool cache, the locals pointer and the bytecode
// pointer, a word each. The tables export the slot of the last SP
// (frame::interpreter_frame_last_sp_offset, -2 in JDK 17) but not those
// after it; they follow it in this order in every release since JDK 8
// (the Serviceability Agent's X86Frame counts them the same way).
const (
	slotsMethodBelowLastSP = 1 // interpreter_frame_method_offset = last_sp - 1
	slotsBCPBelowLastSP    = 6 // interpreter_frame_bcp_offset = last_sp - 6
	wordSize               = 8
)

// interpreterSlots returns the offsets from RBP of an interpreter frame's
// Method* and bytecode pointer slots.
func (l *layout) interpreterSlots() (method, bcp int64) {
	return (l.interpLastSP - slotsMethodBelowLastSP) * wordSize, (l.interpLastSP - slotsBCPBelowLastSP) * wordSize
}

// SenderSPSlot is the offset from an interpreter frame's RBP of the slot
// holding its caller's SP (frame::interpreter_frame_sender_sp_offset).
func (vm *VM) SenderSPSlot() int64 { return vm.l.interpSenderSP * wordSize }
