package unwind

import "encoding/binary"

// Unwind walks the stack described by in, appending frames to out.
// First cut: frame-pointer walk with sanity checks.
func Unwind(in *Input, out []Frame) ([]Frame, StopReason) {
	max := in.MaxFrames
	if max <= 0 {
		max = 1024
	}
	pc, ok := in.Regs.Get(RegRIP)
	if !ok {
		return out, StopUnknownReg
	}
	sp, _ := in.Regs.Get(RegRSP)
	out = append(out, Frame{PC: pc, SP: sp, Method: MethodRegs, Exact: true})
	fp, ok := in.Regs.Get(RegRBP)
	if !ok {
		return out, StopUnknownReg
	}
	read := func(addr uint64) (uint64, bool) {
		if addr < in.Stack.Addr || addr+8 > in.Stack.Addr+uint64(len(in.Stack.Data)) {
			return 0, false
		}
		off := addr - in.Stack.Addr
		return binary.LittleEndian.Uint64(in.Stack.Data[off:]), true
	}
	prev := sp
	for len(out) < max {
		if fp == 0 {
			return out, StopEnd
		}
		if fp&7 != 0 || fp < prev || (in.StackHi != 0 && (fp < in.StackLo || fp+16 > in.StackHi)) {
			return out, StopLeftStack
		}
		next, ok1 := read(fp)
		ret, ok2 := read(fp + 8)
		if !ok1 || !ok2 {
			return out, StopStackCopy
		}
		if ret == 0 {
			return out, StopPCZero
		}
		if mi, ok := in.Space.Lookup(ret); !ok || !mi.Exec {
			return out, StopNotExec
		}
		out = append(out, Frame{PC: ret, SP: fp + 16, Method: MethodFP})
		if next != 0 && next <= fp {
			return out, StopNoProgress
		}
		prev = fp + 16
		fp = next
	}
	return out, StopMaxFrames
}
