package symtab

// GoRuntimeVars are the addresses (file virtual addresses) of the runtime
// variables that list a Go program's goroutines.
type GoRuntimeVars struct {
	Allgs   uint64 // runtime.allgs: a []*g
	Allglen uint64 // runtime.allglen: a uintptr, stored atomically
	// Source says how they were found: "symtab" (the binary's symbols) or
	// "code" (the instructions of runtime.allgadd).
	Source string
}

// maxAllgaddSize bounds the code of runtime.allgadd read.
const maxAllgaddSize = 4096

// GoRuntimeVars finds runtime.allgs and runtime.allglen: from the symbol
// table when the binary keeps one, else from the code of runtime.allgadd
// (named by the pclntab, which stripped binaries keep), which appends to
// allgs, a slice in .bss whose three words it addresses, and stores
// allglen, in .noptrbss, with an atomic exchange.
func (m *Module) GoRuntimeVars() (GoRuntimeVars, bool) {
	if syms := m.GoSymbols("runtime.allgs", "runtime.allglen"); len(syms) == 2 {
		return GoRuntimeVars{Allgs: syms["runtime.allgs"], Allglen: syms["runtime.allglen"], Source: "symtab"}, true
	}
	info, ok := m.GoInfo()
	if !ok || info.PtrSize != 8 || info.Bss == 0 || info.Noptrbss == 0 {
		return GoRuntimeVars{}, false
	}
	entry, end, ok := m.GoFunc("runtime.allgadd")
	if !ok || end <= entry || end-entry > maxAllgaddSize {
		return GoRuntimeVars{}, false
	}
	off, ok := vaddrToOffset(m.loads, entry, end-entry)
	if !ok || off > uint64(m.file.size) || end-entry > uint64(m.file.size)-off {
		return GoRuntimeVars{}, false
	}
	code := make([]byte, end-entry)
	if _, err := m.file.r.ReadAt(code, int64(off)); err != nil {
		return GoRuntimeVars{}, false
	}
	v, ok := allgsFromCode(code, entry, info)
	if !ok {
		return GoRuntimeVars{}, false
	}
	v.Source = "code"
	return v, true
}

// allgsFromCode finds allgs and allglen among the RIP-relative memory
// operands of runtime.allgadd's code at entry (amd64): allgs is the .bss
// address whose length word (+8) is also addressed (and that is no length
// word itself), allglen the .noptrbss
// address an XCHG stores to (the atomic store). Each must be the only
// candidate.
func allgsFromCode(code []byte, entry uint64, info GoInfo) (GoRuntimeVars, bool) {
	inBss := func(a uint64) bool { return a >= info.Bss && a < info.Ebss }
	inNoptrbss := func(a uint64) bool { return a >= info.Noptrbss && a < info.Enoptrbss }
	refs := map[uint64]bool{}
	xchg := map[uint64]bool{}
	// REX.W (or REX.WR) + MOV/LEA/XCHG + ModRM with mod 00 and r/m 101
	// (RIP-relative) + disp32: 7 bytes, the operand relative to the next
	// instruction.
	for i := 0; i+7 <= len(code); i++ {
		if code[i] != 0x48 && code[i] != 0x4c {
			continue
		}
		op := code[i+1]
		if op != 0x8b && op != 0x89 && op != 0x8d && op != 0x87 || code[i+2]&0xc7 != 0x05 {
			continue
		}
		disp := int32(uint32(code[i+3]) | uint32(code[i+4])<<8 | uint32(code[i+5])<<16 | uint32(code[i+6])<<24)
		target := entry + uint64(i+7) + uint64(int64(disp))
		refs[target] = true
		// XCHG to the operand, or LEA of it followed by an XCHG through
		// a register (how Go 1.26 compiles atomic.Storeuintptr).
		if op == 0x87 || op == 0x8d && i+9 <= len(code) && code[i+7]&0xf0 == 0x40 && code[i+8] == 0x87 {
			xchg[target] = true
		}
	}
	var v GoRuntimeVars
	n := 0
	for a := range refs {
		if inBss(a) && refs[a+8] && inBss(a+8) && !refs[a-8] {
			v.Allgs = a
			n++
		}
	}
	if n != 1 {
		return GoRuntimeVars{}, false
	}
	n = 0
	for a := range xchg {
		if inNoptrbss(a) {
			v.Allglen = a
			n++
		}
	}
	return v, n == 1
}
