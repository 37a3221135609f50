package symtab

import (
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"sort"
)

// GoInfo is what a Go binary says about itself: its Go version and where
// the runtime's module data and sections lie. Addresses are file virtual
// addresses (add the module's load bias for runtime addresses); 0 when
// not found.
type GoInfo struct {
	// Version is the toolchain's version from the build info
	// ("go1.19.8"); "" if the build info could not be read.
	Version string
	PtrSize int
	Pclntab uint64 // the pclntab header (runtime.pcHeader)
	// Moduledata is runtime.firstmoduledata, found as the module data whose
	// first word points at the pclntab (a relocation's addend in a PIE).
	// The fields below come from it (Text is the pclntab's text base even
	// without it).
	Moduledata            uint64
	Text, Etext           uint64
	Noptrdata, Enoptrdata uint64
	Data, Edata           uint64
	Bss, Ebss             uint64
	Noptrbss, Enoptrbss   uint64
}

// GoInfo returns what the module's Go build info and pclntab say, and
// false when the module is not a Go binary whose pclntab was found.
func (m *Module) GoInfo() (GoInfo, bool) {
	if m.mismatch {
		return GoInfo{}, false
	}
	g := m.sources().goTable()
	if g == nil {
		return GoInfo{}, false
	}
	return g.info, true
}

// GoFunc returns the entry and end (file virtual addresses) of the Go
// function named name, from the pclntab: stripped binaries keep the
// runtime's functions there, and the code of one that uses a runtime
// variable (runtime.allgadd stores runtime.allgs and allglen) locates it.
func (m *Module) GoFunc(name string) (entry, end uint64, ok bool) {
	if m.mismatch {
		return 0, 0, false
	}
	g := m.sources().goTable()
	if g == nil {
		return 0, 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	safely("gopclntab lookup", func() error {
		if fn := g.tab.LookupFunc(name); fn != nil {
			entry, end, ok = fn.Entry, fn.End, true
		}
		return nil
	})
	return entry, end, ok
}

// GoFrames returns the module's Go frame sizes, or nil when it has no
// pclntab this reader knows (Go 1.18 and later).
func (m *Module) GoFrames() *GoFrames {
	if m.mismatch || m.file == nil || !maybeGo(m.file) {
		return nil
	}
	g := m.sources().goTable()
	if g == nil {
		return nil
	}
	return g.frames
}

// maybeGo reports cheaply whether f may be a Go binary (without reading
// its segments): every module the unwinder meets is asked.
func maybeGo(f *openFile) bool {
	if len(f.ef.Sections) > 0 && f.ef.Section(".text") != nil {
		return f.ef.Section(".go.buildinfo") != nil || f.ef.Section(".gopclntab") != nil
	}
	return true
}

// GoFrames gives the frame size of Go code at a pc from the pclntab's
// pc-to-SP-delta tables (pcsp), exact at every instruction: what an
// unwinder needs for Go code, which has no CFI once stripped. It reads
// Go 1.18+ tables and is safe for concurrent use.
type GoFrames struct {
	order   binary.ByteOrder
	quantum uint64
	text    uint64
	nfunc   int
	pctab   []byte
	pcln    []byte   // the functab, then the _func structures
	flagOff uint64   // offset of _func.flag: 41 (Go 1.20+), 37 (Go 1.18, 1.19)
	stops   []uint32 // entry offsets of functions beyond which no walk goes
}

// goStopFuncs end a walk although the runtime does not flag them as top
// frames: runtime.morestack runs on g0 after saving the goroutine's
// context in g.sched, which only the goroutine's g leads back to (Go's own
// traceback switches stacks there through g; frame pointer and CFI lead
// to stale words of g0).
var goStopFuncs = []string{"runtime.morestack", "runtime.morestack_noctxt"}

// markStops records the entries of goStopFuncs, named by tab.
func (g *GoFrames) markStops(tab *gosym.Table) {
	for _, name := range goStopFuncs {
		if fn := tab.LookupFunc(name); fn != nil && fn.Entry >= g.text && fn.Entry-g.text <= 0xffffffff {
			g.stops = append(g.stops, uint32(fn.Entry-g.text))
		}
	}
}

// _func.flag bits (runtime/internal/abi FuncFlag).
const (
	goFuncFlagTopFrame = 1 << 0
	goFuncFlagSPWrite  = 1 << 1
)

// newGoFrames parses a Go 1.18+ pcHeader whose function entries are
// offsets from text.
func newGoFrames(data []byte, order binary.ByteOrder, text uint64) *GoFrames {
	if len(data) < 8+8*8 || data[7] != 8 || text == 0 {
		return nil
	}
	var flagOff uint64
	switch order.Uint32(data) {
	case 0xfffffff1:
		flagOff = 41
	case 0xfffffff0:
		flagOff = 37
	default:
		return nil
	}
	n := uint64(len(data))
	word := func(i int) uint64 { return order.Uint64(data[8+i*8:]) }
	nfunc, pctab, pcln := word(0), word(6), word(7)
	if nfunc == 0 || nfunc > n/8 || pctab > n || pcln > n || uint64(len(data[pcln:]))/8 < nfunc+1 {
		return nil
	}
	return &GoFrames{order: order, quantum: uint64(data[6]), text: text, nfunc: int(nfunc),
		pctab: data[pctab:], pcln: data[pcln:], flagOff: flagOff}
}

func (g *GoFrames) u32(off uint64) (uint32, bool) {
	if off > uint64(len(g.pcln)) || uint64(len(g.pcln))-off < 4 {
		return 0, false
	}
	return g.order.Uint32(g.pcln[off:]), true
}

// FrameSize returns, for the file virtual address vaddr inside a Go
// function, the function's entry, the bytes between the stack pointer
// there and the slot of the function's return address (the caller's SP is
// SP+size+8), and whether
// the function is a stack root (runtime.goexit, mstart, rt0_go: nothing
// calls it; runtime.morestack: its caller is found only through g) or moves SP to another stack (systemstack, mcall, asmcgocall,
// morestack: its caller is not where its frame size says).
func (g *GoFrames) FrameSize(vaddr uint64) (entry, size uint64, root, switches, ok bool) {
	if g == nil || vaddr < g.text || vaddr-g.text > 0xffffffff {
		return 0, 0, false, false, false
	}
	off := uint32(vaddr - g.text)
	i := sort.Search(g.nfunc, func(i int) bool {
		e, _ := g.u32(uint64(i) * 8)
		return e > off
	}) - 1
	if i < 0 {
		return 0, 0, false, false, false
	}
	eoff, _ := g.u32(uint64(i) * 8)
	if next, ok := g.u32(uint64(i+1) * 8); !ok || off >= next {
		return 0, 0, false, false, false
	}
	fo, ok := g.u32(uint64(i)*8 + 4)
	if !ok || uint64(fo)+g.flagOff >= uint64(len(g.pcln)) {
		return 0, 0, false, false, false
	}
	pcsp, ok := g.u32(uint64(fo) + 16)
	if !ok {
		return 0, 0, false, false, false
	}
	flag := g.pcln[uint64(fo)+g.flagOff]
	entry = g.text + uint64(eoff)
	v, ok := pcvalue(g.pctab, pcsp, entry, g.quantum, vaddr)
	if !ok || v < 0 {
		return 0, 0, false, false, false
	}
	root = flag&goFuncFlagTopFrame != 0
	for _, e := range g.stops {
		root = root || e == eoff
	}
	return entry, uint64(v), root, flag&goFuncFlagSPWrite != 0, true
}

// agrees checks the reader against debug/gosym on functions spread over
// the table: most are found at their entry, where nothing is pushed yet,
// and none says otherwise.
func (g *GoFrames) agrees(tab *gosym.Table) bool {
	n := len(tab.Funcs)
	if n == 0 {
		return false
	}
	checked := 0
	err := safely("go frame check", func() error {
		for k := 0; k < 64; k++ {
			fn := &tab.Funcs[k*(n-1)/63]
			if fn.End <= fn.Entry {
				continue
			}
			// (Markers such as go:textfipsstart have no table.)
			entry, size, _, _, ok := g.FrameSize(fn.Entry)
			if ok && (size != 0 || entry != fn.Entry) {
				return ErrNoSymbols
			}
			if ok {
				checked++
			}
		}
		return nil
	})
	return err == nil && checked >= 32
}

// pcvalue runs the pc-value table at off in pctab, for the function
// entered at entry, up to pc, as the runtime's pcvalue does.
func pcvalue(pctab []byte, off uint32, entry, quantum, pc uint64) (int32, bool) {
	if off == 0 || uint64(off) >= uint64(len(pctab)) {
		return -1, false
	}
	return GoPCValue(pctab[off:], entry, pc, quantum)
}

// GoSymbols returns the file virtual addresses of the named symbols
// (runtime.allgs, runtime.allglen...) from the binary's .symtab; names a
// stripped binary lacks are absent from the result. The pclntab holds
// only functions: in a stripped binary the runtime's variables are found
// through the code that uses them (GoFunc) within the ranges GoInfo gives
// (allgs in bss, allglen in noptrbss).
func (m *Module) GoSymbols(names ...string) map[string]uint64 {
	out := map[string]uint64{}
	if m.mismatch || m.file == nil || len(names) == 0 {
		return out
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	safely("symtab", func() error {
		syms, err := m.file.ef.Symbols()
		if err != nil {
			return err
		}
		for _, s := range syms {
			if want[s.Name] && s.Section != elf.SHN_UNDEF {
				out[s.Name] = s.Value
			}
		}
		return nil
	})
	return out
}
