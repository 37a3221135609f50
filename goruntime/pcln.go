package goruntime

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"stackshot/symtab"
)

// pcln reads the function table of the running program from its memory,
// through runtime.firstmoduledata, as the runtime's own findfunc and
// funcspdelta do: this is what makes a goroutine's stack walk need neither
// frame pointers nor DWARF, and it works the same for PIE and externally
// linked binaries (the pointers in memory are already relocated).
type pcln struct {
	mem                io.ReaderAt
	l                  *Layout
	quantum            uint64
	text, minpc, maxpc uint64
	funcnametab        span
	pctab              span
	pclntable          span
	ftab               []byte // functab entries: entryoff, funcoff (uint32 each)
	nftab              int
	funcs              map[uint32]*funcInfo // by funcoff
	spd                map[uint64]int32     // pc -> frame size at pc
}

type span struct{ addr, n uint64 }

type funcInfo struct {
	entry   uint64
	name    string
	pcsp    []byte // the function's pcsp table, or its start (nil: no frame)
	pcspOff uint64 // where it starts in pctab
	wrapper bool   // compiler-generated (tracebacks leave it out)
}

const (
	maxFtab        = 1 << 22 // function table entries
	maxFuncName    = 4096
	pcspChunk      = 512
	maxPcspTable   = 1 << 16
	funcHeaderRead = 48
)

// pclntab header magics of the formats read here (Go 1.18-1.19, 1.20+).
const (
	pclnMagic118 = 0xfffffff0
	pclnMagic120 = 0xfffffff1
)

func readFull(mem io.ReaderAt, buf []byte, addr uint64) error {
	if addr == 0 {
		return fmt.Errorf("reading %d bytes at address 0", len(buf))
	}
	n, err := mem.ReadAt(buf, int64(addr))
	if n == len(buf) {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func readWord(mem io.ReaderAt, addr uint64) (uint64, error) {
	var b [8]byte
	if err := readFull(mem, b[:], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// newPcln reads the moduledata at md and the function table it points to.
func newPcln(mem io.ReaderAt, l *Layout, md uint64) (*pcln, error) {
	raw := make([]byte, l.MDEnoptrbss+8)
	if err := readFull(mem, raw, md); err != nil {
		return nil, fmt.Errorf("reading runtime.firstmoduledata at %#x: %w", md, err)
	}
	w := func(off int) uint64 { return binary.LittleEndian.Uint64(raw[off:]) }
	hdr := w(l.MDPcHeader)
	var h [8]byte
	if err := readFull(mem, h[:], hdr); err != nil {
		return nil, fmt.Errorf("reading the pclntab header at %#x: %w", hdr, err)
	}
	magic := binary.LittleEndian.Uint32(h[:])
	if (magic != pclnMagic118 && magic != pclnMagic120) || h[4] != 0 || h[5] != 0 || h[7] != 8 || h[6] == 0 || h[6] > 4 {
		return nil, fmt.Errorf("no pclntab header of a 64-bit Go 1.18+ program at %#x", hdr)
	}
	p := &pcln{mem: mem, l: l, quantum: uint64(h[6]), text: w(l.MDText), minpc: w(l.MDMinPC), maxpc: w(l.MDMaxPC),
		funcnametab: span{w(l.MDFuncnametab), w(l.MDFuncnametab + 8)},
		pctab:       span{w(l.MDPctab), w(l.MDPctab + 8)},
		pclntable:   span{w(l.MDPclntable), w(l.MDPclntable + 8)},
		funcs:       map[uint32]*funcInfo{}, spd: map[uint64]int32{}}
	nftab := w(l.MDFtab + 8)
	if p.text == 0 || p.minpc < p.text || p.maxpc <= p.minpc || nftab < 2 || nftab > maxFtab {
		return nil, fmt.Errorf("runtime.firstmoduledata at %#x is not valid (text %#x, pcs %#x-%#x, %d functions)", md, p.text, p.minpc, p.maxpc, nftab)
	}
	p.nftab = int(nftab)
	p.ftab = make([]byte, 8*nftab)
	if err := readFull(mem, p.ftab, w(l.MDFtab)); err != nil {
		return nil, fmt.Errorf("reading the function table: %w", err)
	}
	// The table is sorted; its last entry is maxpc.
	if last := p.text + uint64(binary.LittleEndian.Uint32(p.ftab[8*(nftab-1):])); last != p.maxpc {
		return nil, fmt.Errorf("function table ends at %#x, not at maxpc %#x", last, p.maxpc)
	}
	return p, nil
}

// inText reports whether pc lies in the module's Go code.
func (p *pcln) inText(pc uint64) bool { return pc >= p.minpc && pc < p.maxpc }

// funcAt returns the function holding pc.
func (p *pcln) funcAt(pc uint64) (*funcInfo, bool) {
	if !p.inText(pc) {
		return nil, false
	}
	off := pc - p.text
	n := p.nftab - 1
	i := sort.Search(n, func(i int) bool {
		return uint64(binary.LittleEndian.Uint32(p.ftab[8*i:])) > off
	}) - 1
	if i < 0 {
		return nil, false
	}
	funcoff := binary.LittleEndian.Uint32(p.ftab[8*i+4:])
	if fi, ok := p.funcs[funcoff]; ok {
		return fi, fi != nil
	}
	fi := p.readFunc(funcoff)
	p.funcs[funcoff] = fi
	return fi, fi != nil
}

func (p *pcln) readFunc(funcoff uint32) *funcInfo {
	if uint64(funcoff)+funcHeaderRead > p.pclntable.n {
		return nil
	}
	var h [funcHeaderRead]byte
	if readFull(p.mem, h[:], p.pclntable.addr+uint64(funcoff)) != nil {
		return nil
	}
	fi := &funcInfo{entry: p.text + uint64(binary.LittleEndian.Uint32(h[p.l.FuncEntryOff:]))}
	fi.wrapper = int(h[p.l.FuncFuncID]) == p.l.FuncIDWrapper
	nameoff := uint64(binary.LittleEndian.Uint32(h[p.l.FuncNameOff:]))
	fi.name = p.cstring(p.funcnametab, nameoff)
	if pcsp := uint64(binary.LittleEndian.Uint32(h[p.l.FuncPcsp:])); pcsp != 0 && pcsp < p.pctab.n {
		n := min(p.pctab.n-pcsp, pcspChunk)
		fi.pcspOff = pcsp
		fi.pcsp = make([]byte, n)
		if readFull(p.mem, fi.pcsp, p.pctab.addr+pcsp) != nil {
			return nil
		}
	}
	return fi
}

// cstring reads a NUL-terminated name at off in s.
func (p *pcln) cstring(s span, off uint64) string {
	if off >= s.n {
		return ""
	}
	n := min(s.n-off, 128)
	for n <= maxFuncName {
		buf := make([]byte, n)
		if readFull(p.mem, buf, s.addr+off) != nil {
			return ""
		}
		if i := bytes.IndexByte(buf, 0); i >= 0 {
			return string(buf[:i])
		}
		if off+n >= s.n {
			return ""
		}
		n = min(s.n-off, 4*n)
	}
	return ""
}

// spDelta returns the frame size of fn at pc: how far SP is below the SP
// at the function's entry (the runtime's funcspdelta).
func (p *pcln) spDelta(fn *funcInfo, pc uint64) (int32, bool) {
	if v, ok := p.spd[pc]; ok {
		return v, true
	}
	if fn.pcsp == nil {
		return 0, true // no table: no frame (assembly NOFRAME)
	}
	v, ok := symtab.GoPCValue(fn.pcsp, fn.entry, pc, p.quantum)
	if !ok && len(fn.pcsp) == pcspChunk {
		// A long table: read it whole (bounded) once.
		pcsp, err := p.growPcsp(fn)
		if err == nil {
			fn.pcsp = pcsp
			v, ok = symtab.GoPCValue(fn.pcsp, fn.entry, pc, p.quantum)
		}
	}
	if !ok || v < 0 {
		return 0, false
	}
	p.spd[pc] = v
	return v, true
}

func (p *pcln) growPcsp(fn *funcInfo) ([]byte, error) {
	n := min(p.pctab.n-fn.pcspOff, maxPcspTable)
	buf := make([]byte, n)
	return buf, readFull(p.mem, buf, p.pctab.addr+fn.pcspOff)
}
