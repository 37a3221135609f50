package hotspot

import (
	"stackshot/report"
)

// Frame types (report.Frame.FrameType).
const (
	Interpreted = report.FrameInterpreted
	Compiled    = report.FrameCompiled
	Inlined     = report.FrameInlined
	// NativeMethod is a Java native method's frame: no type in the JSON
	// (the contract has none for it), "(Native Method)" in the text.
	NativeMethod = report.FrameNative
)

// maxDebugInfo bounds the PcDescs, scopes and metadata read of an nmethod.
const maxDebugInfo = 4 << 20

// maxInlineDepth bounds the scopes followed at one PC.
const maxInlineDepth = 64

// WordReader reads a word of a thread's stack (its captured copy).
type WordReader func(addr uint64) (uint64, bool)

// Frames names the physical frame at pc, in the code cache, innermost
// first: an interpreted method (fp is the frame's RBP, its slots read
// through read), a compiled one with the methods inlined at pc, or a stub
// or the interpreter's own code by name (Kind "user"). exact is set when
// pc is the instruction being executed (frame 0 or a signal's), not a
// return address. nil when pc is in no blob.
func (vm *VM) Frames(pc uint64, exact bool, fp uint64, read WordReader) []report.Frame {
	b := vm.BlobAt(pc)
	if b == nil {
		return nil
	}
	vm.mu.Lock()
	defer vm.mu.Unlock()
	switch b.Kind {
	case BlobInterpreter:
		if f, ok := vm.interpreted(fp, read); ok {
			return []report.Frame{f}
		}
		return []report.Frame{{Kind: "user", Function: "Interpreter"}}
	case BlobCompiled, BlobNative:
		return vm.compiled(b, pc, exact)
	}
	return []report.Frame{{Kind: "user", Function: vm.stubName(b, pc)}}
}

// stubName names a stub blob's code.
func (vm *VM) stubName(b *Blob, pc uint64) string {
	if vm.callStubReturn != 0 && pc == vm.callStubReturn {
		return "StubRoutines::call_stub"
	}
	return b.Name
}

// interpreted names an interpreter frame from its Method* and bytecode
// pointer slots.
func (vm *VM) interpreted(fp uint64, read WordReader) (report.Frame, bool) {
	if fp == 0 || read == nil {
		return report.Frame{}, false
	}
	ms, bs := vm.l.interpreterSlots()
	mp, ok1 := read(fp + uint64(ms))
	bcp, ok2 := read(fp + uint64(bs))
	if !ok1 || !ok2 {
		return report.Frame{}, false
	}
	mt := vm.methodAt(mp)
	if mt == nil {
		return report.Frame{}, false
	}
	line := 0
	if !mt.native && bcp >= mt.codeBase && bcp < mt.codeBase+mt.codeSize {
		line = lineFor(mt.lines, int(bcp-mt.codeBase))
	}
	return javaFrame(mt, line, Interpreted), true
}

// javaFrame is mt's frame. A native method's has no file, line or type
// (jstack's "Native Method"), whether the interpreter's native entry or a
// compiled wrapper runs it.
func javaFrame(mt *method, line int, typ report.FrameType) report.Frame {
	if mt.native {
		return report.Frame{Kind: "java", Function: mt.Function(), FrameType: NativeMethod}
	}
	f := report.Frame{Kind: "java", Function: mt.Function(), File: mt.file, FrameType: typ}
	if line > 0 {
		f.Line = line
	}
	return f
}

// compiled names an nmethod's frame at pc: the scopes of its PcDesc there
// (innermost first: the inlined methods, then the nmethod's own), else
// its method alone.
func (vm *VM) compiled(b *Blob, pc uint64, exact bool) []report.Frame {
	own := vm.methodAt(b.method)
	if own == nil {
		return []report.Frame{{Kind: "user", Function: b.Name}}
	}
	if b.Kind == BlobNative {
		return []report.Frame{javaFrame(own, 0, Compiled)}
	}
	if out := vm.scopes(b, pc, exact); len(out) > 0 {
		return out
	}
	return []report.Frame{javaFrame(own, 0, Compiled)}
}

// debugInfo is an nmethod's PcDescs, scopes data and metadata, read once.
type debugInfo struct {
	pcs, scopes, meta []byte
}

func (vm *VM) debugInfo(b *Blob) *debugInfo {
	if b.debug != nil {
		return b.debug
	}
	d := &debugInfo{}
	b.debug = d
	rd := func(lo, hi uint64) []byte {
		if hi <= lo || hi-lo > maxDebugInfo {
			return nil
		}
		buf := make([]byte, hi-lo)
		if vm.m.read(buf, lo) != nil {
			return nil
		}
		return buf
	}
	if b.scopes < b.meta || b.pcs < b.scopes || b.pcsEnd < b.pcs {
		return d
	}
	d.pcs, d.scopes, d.meta = rd(b.pcs, b.pcsEnd), rd(b.scopes, b.pcs), rd(b.meta, b.metaEnd)
	return d
}

// scopes decodes the scopes at pc (see ScopeDesc in HotSpot's
// scopeDesc.cpp): each is its sender's offset in the scopes data (0: none,
// the outermost), its method's index in the metadata (from 1), and its
// bytecode index minus InvocationEntryBci.
func (vm *VM) scopes(b *Blob, pc uint64, exact bool) []report.Frame {
	d := vm.debugInfo(b)
	l := vm.l
	if d.pcs == nil || d.scopes == nil || l.pcDescSize == 0 || pc < b.CodeBegin {
		return nil
	}
	decode := findPcDesc(d.pcs, l.pcDescSize, l.pcPCOffset, l.pcScopeDecode, pc-b.CodeBegin, exact)
	return vm.scopeChain(d, decode)
}

// scopeChain names the scopes from the one at decode offset off
// outward (scopes).
func (vm *VM) scopeChain(d *debugInfo, off int64) []report.Frame {
	chain, ok := scopes(d.scopes, off)
	if !ok {
		return nil
	}
	out := make([]report.Frame, 0, len(chain))
	for _, sc := range chain {
		if sc.method == 0 || uint64(sc.method)*8 > uint64(len(d.meta)) {
			return nil
		}
		mt := vm.methodAt(le64(d.meta[(sc.method-1)*8:]))
		if mt == nil {
			return nil
		}
		bci := int64(sc.bci) + vm.l.invocationEntryBCI
		line := 0
		if bci >= 0 && !mt.native {
			line = lineFor(mt.lines, int(bci))
		}
		out = append(out, javaFrame(mt, line, Inlined))
	}
	out[len(out)-1].FrameType = Compiled
	return out
}

// scopes decodes the chain of scopes from the one at off (the innermost)
// to the outermost, whose sender offset is 0; false when the chain is
// empty, longer than maxInlineDepth, or not one (a sender is always
// written before its callee: its offset is lower).
func scopes(data []byte, off int64) ([]scope, bool) {
	var out []scope
	for depth := 0; off > 0 && depth < maxInlineDepth; depth++ {
		sc, ok := decodeScope(data, off)
		if !ok || sc.sender != 0 && int64(sc.sender) >= off {
			return nil, false
		}
		out = append(out, sc)
		off = int64(sc.sender)
	}
	return out, off == 0 && len(out) > 0
}

// scope is one decoded ScopeDesc head.
type scope struct {
	sender, method, bci uint32
}

// decodeScope reads the scope at off in the scopes data.
func decodeScope(data []byte, off int64) (scope, bool) {
	if off < 0 || off >= int64(len(data)) {
		return scope{}, false
	}
	s := stream{b: data, off: int(off)}
	sc := scope{sender: s.uint(), method: s.uint(), bci: s.uint()}
	return sc, s.err == nil
}

// findPcDesc returns the scope decode offset of the PcDesc for code
// offset off: the one at off exactly for a return address; for an exact PC
// (a running thread's) the last one at or before it, the debug info the
// compiler recorded last in the code leading there (an approximation: the
// instruction may belong to a scope that has no PcDesc of its own; the
// first one after it, as AsyncGetCallTrace takes, put a loop's samples in
// the next method's scope in the record test); -1 when none.
func findPcDesc(pcs []byte, size, pcOff, scopeOff, off uint64, exact bool) int64 {
	if size < 8 || pcOff+4 > size || scopeOff+4 > size {
		return -1
	}
	best, bestPC := int64(-1), uint64(1<<63)
	for i := uint64(0); i+size <= uint64(len(pcs)); i += size {
		p := uint64(le32(pcs[i+pcOff:]))
		sd := int64(int32(le32(pcs[i+scopeOff:])))
		if p == off && !exact {
			return sd
		}
		if exact && p <= off && (bestPC == 1<<63 || p > bestPC) {
			best, bestPC = sd, p
		}
	}
	return best
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
