package symtab

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"fmt"
	"sync"
)

// goTable resolves pcs of a Go binary through its pclntab, which Go keeps
// even in binaries linked with -s -w.
type goTable struct {
	mu     sync.Mutex // debug/gosym keeps caches
	tab    *gosym.Table
	inl    *goInline // inline trees (Go 1.20+), or nil
	frames *GoFrames // frame sizes (Go 1.18+), or nil
	info   GoInfo
}

// maxPclntabScan bounds the bytes of one segment read while looking for
// a pclntab or the module data.
const maxPclntabScan = 1 << 30

// dataSeg is a non-executable PT_LOAD segment's file bytes, read once for
// every search of a Go binary's tables.
type dataSeg struct {
	vaddr    uint64
	data     []byte
	writable bool
}

// dataSegs reads the file bytes of the non-executable PT_LOAD segments
// (read-only data, and the writable segment whose RELRO part holds
// .data.rel.ro in externally linked binaries) once, for every search of a
// Go binary's tables; the module data search needs only the writable ones.
type dataSegs struct {
	f        *openFile
	segs     []dataSeg
	read     bool // all segments read
	writable []dataSeg
	wread    bool
}

func (d *dataSegs) all() []dataSeg {
	if !d.read {
		d.segs, d.read = readDataSegs(d.f, false), true
	}
	return d.segs
}

func (d *dataSegs) writableOnly() []dataSeg {
	if d.read {
		var w []dataSeg
		for _, s := range d.segs {
			if s.writable {
				w = append(w, s)
			}
		}
		return w
	}
	if !d.wread {
		d.writable, d.wread = readDataSegs(d.f, true), true
	}
	return d.writable
}

// readDataSegs reads the non-executable PT_LOAD segments' file bytes
// (only the writable ones if writable is set).
func readDataSegs(f *openFile, writable bool) []dataSeg {
	var segs []dataSeg
	for _, p := range f.ef.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X != 0 || writable && p.Flags&elf.PF_W == 0 {
			continue
		}
		if p.Filesz == 0 || p.Filesz > maxPclntabScan || p.Off > uint64(f.size) || p.Filesz > uint64(f.size)-p.Off {
			continue
		}
		seg := make([]byte, p.Filesz)
		if _, err := f.r.ReadAt(seg, int64(p.Off)); err != nil {
			continue
		}
		segs = append(segs, dataSeg{vaddr: p.Vaddr, data: seg, writable: p.Flags&elf.PF_W != 0})
	}
	return segs
}

// isGoBinary reports whether f is a Go program: its .go.buildinfo or
// .gopclntab section, or, when the section headers are gone, Go's build
// info in a data segment (segs read on demand). A pclntab magic in a
// binary that is not Go is a chance match.
func isGoBinary(f *openFile, segs func() []dataSeg) bool {
	if len(f.ef.Sections) > 0 && f.ef.Section(".text") != nil {
		return maybeGo(f)
	}
	for _, s := range segs() {
		if bytes.Contains(s.data, goBuildInfoMagic) {
			return true
		}
	}
	return false
}

// loadGoTable finds the pclntab: the .gopclntab section, else (stripped
// section headers, or a table the external linker put inside
// .data.rel.ro) a header found in the data segments and validated in full.
func loadGoTable(f *openFile) (*goTable, error) {
	ef := f.ef
	segs := &dataSegs{f: f}
	var data []byte
	var addr uint64
	if s := ef.Section(".gopclntab"); s != nil && s.Type != elf.SHT_NOBITS {
		b, err := sectionData(s, f.size)
		if err != nil {
			return nil, err
		}
		data, addr = b, s.Addr
	} else if isGoBinary(f, segs.all) {
		data, addr = scanPclntab(ef, segs.all())
	}
	if err := checkPclntabHeader(data, ef.ByteOrder); err != nil {
		return nil, err
	}
	ptrSize := int(data[7])
	magic, end := ef.ByteOrder.Uint32(data), addr+uint64(len(data))
	md, ok := moduledataAt(f, segs.writableOnly(), magic, addr, end, ptrSize)
	if !ok {
		md, ok = moduledataRela(f, magic, addr, end, ptrSize)
	}
	text, gofunc := md.text, md.gofunc
	if !ok {
		text, gofunc = textStart(ef), 0
	}
	var tab *gosym.Table
	err := safely("gopclntab", func() error {
		lt := gosym.NewLineTable(data, text)
		t, err := gosym.NewTable(nil, lt)
		if err != nil {
			return err
		}
		if len(t.Funcs) == 0 {
			return ErrNoSymbols
		}
		// A wrong text base would name every pc wrongly: the functions
		// must lie in executable segments.
		for _, fn := range []gosym.Func{t.Funcs[0], t.Funcs[len(t.Funcs)/2], t.Funcs[len(t.Funcs)-1]} {
			if !inExec(ef, fn.Entry) {
				return &FormatError{Section: ".gopclntab", Msg: fmt.Sprintf("function %s at %#x is outside the code", fn.Name, fn.Entry)}
			}
		}
		tab = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	g := &goTable{tab: tab}
	g.info = GoInfo{PtrSize: ptrSize, Pclntab: addr, Text: text}
	if ok {
		g.info.Moduledata = md.addr
		g.info.Etext, g.info.Bss, g.info.Ebss, g.info.Noptrbss, g.info.Enoptrbss = md.etext, md.bss, md.ebss, md.noptrbss, md.enoptrbss
		g.info.Data, g.info.Edata, g.info.Noptrdata, g.info.Enoptrdata = md.data, md.edata, md.noptrdata, md.enoptrdata
	}
	g.info.Version = goVersion(f, segs.all)
	if gofunc != 0 && !inExec(ef, gofunc) {
		if inl := newGoInline(data, ef.ByteOrder, text, gofunc, f); inl != nil && inl.agrees(tab) {
			g.inl = inl
		}
	}
	if fr := newGoFrames(data, ef.ByteOrder, text); fr != nil && fr.agrees(tab) {
		safely("gopclntab lookup", func() error { fr.markStops(tab); return nil })
		g.frames = fr
	}
	return g, nil
}

// checkPclntabHeader bounds the counts in a pclntab header by the table's
// size before debug/gosym allocates by them.
func checkPclntabHeader(data []byte, order binary.ByteOrder) error {
	if len(data) < 16 {
		return ErrNoSymbols
	}
	ptr := int(data[7])
	if ptr != 4 && ptr != 8 || len(data) < 8+3*ptr {
		return &FormatError{Section: ".gopclntab", Msg: "bad header"}
	}
	word := func(b []byte) uint64 {
		if ptr == 8 {
			return order.Uint64(b)
		}
		return uint64(order.Uint32(b))
	}
	nfunc := word(data[8:])
	nfiles := word(data[8+ptr:])
	if order.Uint32(data) == 0xfffffffb {
		nfiles = 0 // Go 1.2-1.15: no file count in the header
	}
	n := uint64(len(data))
	if nfunc == 0 || nfunc > n/8 || nfiles > n/4 {
		return &FormatError{Section: ".gopclntab", Msg: fmt.Sprintf("counts (%d functions, %d files) exceed the table", nfunc, nfiles)}
	}
	return nil
}

func inExec(ef *elf.File, addr uint64) bool {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr-p.Vaddr < p.Memsz {
			return true
		}
	}
	return false
}

// textStart is runtime.text: the start of .text, else of the first
// executable segment.
func textStart(ef *elf.File) uint64 {
	if s := ef.Section(".text"); s != nil {
		return s.Addr
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			return p.Vaddr
		}
	}
	return 0
}

// lookupSyms appends the frames at pc: through the direct reader with its
// inline trees when the table has them (checked against debug/gosym at
// load), else one frame from debug/gosym.
func (g *goTable) lookupSyms(pc uint64, out []Sym) ([]Sym, bool) {
	if g.inl != nil {
		n := len(out)
		var found bool
		err := safely("go inline tree", func() error {
			out, found = g.inl.lookup(pc, out)
			return nil
		})
		if err == nil && found {
			return out, true
		}
		out = out[:n]
	}
	name, entry, file, line, ok := g.lookup(pc)
	if !ok {
		return out, false
	}
	return append(out, Sym{Function: name, Offset: pc - entry, File: file, Line: line}), true
}

// lookup returns the function, file and line at pc.
func (g *goTable) lookup(pc uint64) (name string, entry uint64, file string, line int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	err := safely("gopclntab lookup", func() error {
		fn := g.tab.PCToFunc(pc)
		if fn == nil || pc >= fn.End {
			return ErrNoSymbols
		}
		name, entry = fn.Name, fn.Entry
		file, line, _ = g.tab.PCToLine(pc)
		ok = true
		return nil
	})
	if err != nil {
		return "", 0, "", 0, false
	}
	return name, entry, file, line, ok
}
