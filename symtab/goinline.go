package symtab

import (
	"bytes"
	"debug/gosym"
	"encoding/binary"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// goInline reads Go 1.20+ pclntabs directly, for what debug/gosym does not
// expose: the inline tree (FUNCDATA_InlTree indexed by
// PCDATA_InlTreeIndex), which turns a pc of a binary linked with -s -w
// into its inlined frames, as the Go runtime's own tracebacks show them.
type goInline struct {
	order       binary.ByteOrder
	quantum     uint64
	text        uint64
	gofunc      uint64 // moduledata.gofunc: base of funcdata offsets
	nfunc       int
	funcnametab []byte
	cutab       []byte
	filetab     []byte
	pctab       []byte
	pcln        []byte // the functab, then the _func structures
	mem         io.ReaderAt
	loads       []loadSeg
	fileSize    int64
	lay         goInlLayout
}

// goInlLayout is where a pclntab version keeps what the inline reader
// needs: the _func header's size (its pcdata and funcdata arrays follow)
// and the inlinedCall entries' size and name and parentPc fields.
type goInlLayout struct {
	funcHeader, callSize, nameAt, parentPcAt uint64
}

var (
	goInlLayout120 = goInlLayout{funcHeader: 44, callSize: 16, nameAt: 4, parentPcAt: 8}   // Go 1.20+
	goInlLayout118 = goInlLayout{funcHeader: 40, callSize: 20, nameAt: 12, parentPcAt: 16} // Go 1.18, 1.19
)

const (
	goPcdataInlTreeIndex = 2
	goFuncdataInlTree    = 3
	maxGoInlinedCallSize = 20
	maxGoInlineDepth     = 64
	maxPcvalueSteps      = 1 << 20
)

// newGoInline parses a Go 1.18+ pcHeader (magic 0xfffffff1 or
// 0xfffffff0, 64-bit); text and gofunc come from moduledata.
func newGoInline(data []byte, order binary.ByteOrder, text, gofunc uint64, f *openFile) *goInline {
	return newGoInlineLoads(data, order, text, gofunc, f, elfLoads(f.ef))
}

// newGoInlineLoads is newGoInline with the file's PT_LOAD segments given.
func newGoInlineLoads(data []byte, order binary.ByteOrder, text, gofunc uint64, f *openFile, loads []loadSeg) *goInline {
	if len(data) < 8+8*8 || data[7] != 8 || gofunc == 0 || text == 0 {
		return nil
	}
	var lay goInlLayout
	switch order.Uint32(data) {
	case 0xfffffff1:
		lay = goInlLayout120
	case 0xfffffff0:
		lay = goInlLayout118
	default:
		return nil
	}
	word := func(i int) uint64 { return order.Uint64(data[8+i*8:]) }
	n := uint64(len(data))
	nfunc := word(0)
	// pcHeader: nfunc, nfiles, (unused), funcnameOffset, cuOffset,
	// filetabOffset, pctabOffset, pclnOffset.
	var offs [5]uint64
	for i := range offs {
		offs[i] = word(3 + i)
		if offs[i] > n {
			return nil
		}
	}
	if nfunc == 0 || nfunc > n/8 || uint64(len(data[offs[4]:])) < (nfunc+1)*8 {
		return nil
	}
	return &goInline{
		order:       order,
		quantum:     uint64(data[6]),
		text:        text,
		gofunc:      gofunc,
		nfunc:       int(nfunc),
		funcnametab: data[offs[0]:],
		cutab:       data[offs[1]:],
		filetab:     data[offs[2]:],
		pctab:       data[offs[3]:],
		pcln:        data[offs[4]:],
		mem:         f.r,
		loads:       loads,
		fileSize:    f.size,
		lay:         lay,
	}
}

func (g *goInline) u32(b []byte, off uint64) (uint32, bool) {
	if off > uint64(len(b)) || uint64(len(b))-off < 4 {
		return 0, false
	}
	return g.order.Uint32(b[off:]), true
}

// goFunc is one _func of the table.
type goFunc struct {
	entry                  uint64
	nameOff                uint32
	pcfile, pcln, cuOffset uint32
	inlIndex               uint32 // pcdata[PCDATA_InlTreeIndex], 0 none
	inlTree                uint32 // funcdata[FUNCDATA_InlTree], ^0 none
}

// findFunc returns the function whose code contains pc.
func (g *goInline) findFunc(pc uint64) (goFunc, bool) {
	if pc < g.text {
		return goFunc{}, false
	}
	off := pc - g.text
	if off > 0xffffffff {
		return goFunc{}, false
	}
	i := sort.Search(g.nfunc, func(i int) bool {
		e, _ := g.u32(g.pcln, uint64(i)*8)
		return uint64(e) > off
	}) - 1
	if i < 0 {
		return goFunc{}, false
	}
	funcoff, ok := g.u32(g.pcln, uint64(i)*8+4)
	if !ok {
		return goFunc{}, false
	}
	fo := uint64(funcoff)
	if fo > uint64(len(g.pcln)) || uint64(len(g.pcln))-fo < g.lay.funcHeader {
		return goFunc{}, false
	}
	h := g.pcln[fo:]
	fn := goFunc{
		entry:    g.text + uint64(g.order.Uint32(h[0:])),
		nameOff:  g.order.Uint32(h[4:]),
		pcfile:   g.order.Uint32(h[20:]),
		pcln:     g.order.Uint32(h[24:]),
		cuOffset: g.order.Uint32(h[32:]),
		inlTree:  ^uint32(0),
	}
	npcdata := uint64(g.order.Uint32(h[28:]))
	nfuncdata := uint64(h[g.lay.funcHeader-1])
	if npcdata > goPcdataInlTreeIndex {
		fn.inlIndex, _ = g.u32(g.pcln, fo+g.lay.funcHeader+goPcdataInlTreeIndex*4)
	}
	if nfuncdata > goFuncdataInlTree && npcdata < 1<<16 {
		if v, ok := g.u32(g.pcln, fo+g.lay.funcHeader+npcdata*4+goFuncdataInlTree*4); ok {
			fn.inlTree = v
		}
	}
	// The next function's entry bounds this one.
	if next, ok := g.u32(g.pcln, uint64(i+1)*8); ok && off >= uint64(next) {
		return goFunc{}, false
	}
	return fn, true
}

// pcvalue runs the pc-value table at off (in pctab) for function fn up to
// pc; -1 when none.
func (g *goInline) pcvalue(off uint32, fn goFunc, pc uint64) (int32, bool) {
	return pcvalue(g.pctab, off, fn.entry, g.quantum, pc)
}

func cstrOf(b []byte, off uint64) string {
	if off >= uint64(len(b)) {
		return ""
	}
	b = b[off:]
	if i := bytes.IndexByte(b, 0); i >= 0 && i < 4096 {
		return string(b[:i])
	}
	return ""
}

// position returns the file and line of fn at pc.
func (g *goInline) position(fn goFunc, pc uint64) (string, int) {
	line, ok := g.pcvalue(fn.pcln, fn, pc)
	if !ok || line < 0 {
		return "", 0
	}
	fileno, ok := g.pcvalue(fn.pcfile, fn, pc)
	if !ok || fileno < 0 {
		return "", int(line)
	}
	fo, ok := g.u32(g.cutab, (uint64(fn.cuOffset)+uint64(fileno))*4)
	if !ok || fo == ^uint32(0) {
		return "", int(line)
	}
	return cstrOf(g.filetab, uint64(fo)), int(line)
}

// readInlinedCall reads entry ix of the inline tree at funcdata offset
// tree, through the file (the tree lives in go:func.*, outside the
// pclntab).
func (g *goInline) readInlinedCall(tree uint32, ix int32) (nameOff uint32, parentPc int32, ok bool) {
	size := g.lay.callSize
	vaddr := g.gofunc + uint64(tree) + uint64(ix)*size
	for _, l := range g.loads {
		if vaddr >= l.vaddr && vaddr+size <= l.vaddr+l.filesz {
			off := l.off + (vaddr - l.vaddr)
			if off+size > uint64(g.fileSize) {
				return 0, 0, false
			}
			var buf [maxGoInlinedCallSize]byte
			b := buf[:size]
			if _, err := g.mem.ReadAt(b, int64(off)); err != nil {
				return 0, 0, false
			}
			return g.order.Uint32(b[g.lay.nameAt:]), int32(g.order.Uint32(b[g.lay.parentPcAt:])), true
		}
	}
	return 0, 0, false
}

// lookup appends the frames at pc, innermost first: one per inlined call,
// then the physical function. It reports false when pc is in no function.
func (g *goInline) lookup(pc uint64, out []Sym) ([]Sym, bool) {
	fn, ok := g.findFunc(pc)
	if !ok {
		return out, false
	}
	cur := pc
	for depth := 0; fn.inlIndex != 0 && fn.inlTree != ^uint32(0) && depth < maxGoInlineDepth; depth++ {
		ix, ok := g.pcvalue(fn.inlIndex, fn, cur)
		if !ok || ix < 0 {
			break
		}
		nameOff, parentPc, ok := g.readInlinedCall(fn.inlTree, ix)
		if !ok || parentPc < 0 {
			break
		}
		file, line := g.position(fn, cur)
		out = append(out, Sym{Function: cstrOf(g.funcnametab, uint64(nameOff)), File: file, Line: line, Inlined: true})
		cur = fn.entry + uint64(parentPc)
	}
	file, line := g.position(fn, cur)
	out = append(out, Sym{Function: cstrOf(g.funcnametab, uint64(fn.nameOff)), Offset: pc - fn.entry, File: file, Line: line})
	return out, true
}

// agrees checks the direct reader against debug/gosym on functions spread
// over the table (entry, name, first line): a layout this reader does not
// know must not name anything.
func (g *goInline) agrees(tab *gosym.Table) bool {
	n := len(tab.Funcs)
	if n == 0 {
		return false
	}
	checked := 0
	err := safely("go inline check", func() error {
		for k := 0; k < 64; k++ {
			fn := &tab.Funcs[k*(n-1)/63]
			if fn.End <= fn.Entry {
				continue
			}
			var out [maxGoInlineDepth + 1]Sym
			got, ok := g.lookup(fn.Entry, out[:0])
			if !ok || len(got) == 0 {
				return ErrNoSymbols
			}
			phys := got[len(got)-1]
			if phys.Function != fn.Name || phys.Offset != 0 {
				return ErrNoSymbols
			}
			file, line, _ := tab.PCToLine(fn.Entry)
			if line <= 0 { // no line table (assembly markers)
				file, line = "", 0
			}
			if file != got[0].File || line != got[0].Line {
				return ErrNoSymbols
			}
			checked++
		}
		// The inline trees, which entries rarely use: the first call of
		// each tree met names a function and returns inside its caller
		// (a wrong gofunc base reads neither).
		for k := 0; k < 256; k++ {
			fn := &tab.Funcs[k*(n-1)/255]
			f, ok := g.findFunc(fn.Entry)
			if !ok || f.inlTree == ^uint32(0) || f.inlIndex == 0 || fn.End <= fn.Entry {
				continue
			}
			nameOff, parentPc, ok := g.readInlinedCall(f.inlTree, 0)
			name := cstrOf(g.funcnametab, uint64(nameOff))
			if !ok || parentPc < 0 || uint64(parentPc) >= fn.End-fn.Entry || !goFuncName(name) {
				return ErrNoSymbols
			}
		}
		return nil
	})
	return err == nil && checked > 0
}

// goFuncName reports whether s looks like a Go function's name
// ("pkg.Func", "pkg.F[go.shape.struct { x int }]"): a dot, valid UTF-8,
// no control characters.
func goFuncName(s string) bool {
	if len(s) < 3 || !strings.Contains(s, ".") || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}
