package capfile

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"stackshot/internal/arch"
	"stackshot/procmaps"
	"stackshot/ptrace"
)

// Note types of a Linux core (linux/elf.h) beside debug/elf's.
const (
	ntPrstatus = 1
	ntPrpsinfo = 3
	ntAuxv     = 6
	ntFile     = 0x46494c45 // "FILE"
	ntSiginfo  = 0x53494749 // "SIGI": the siginfo_t of the signal that dumped core
	// ntStackshot, in a note named "STACKSHOT", carries what a core has
	// no place for (thread names, capture methods, kernel stacks, system
	// calls) as the capture file's JSON of the process, without the
	// stack and vdso bytes (they are in PT_LOAD segments).
	ntStackshot = 1
)

const (
	noteCore      = "CORE"
	noteStackshot = "STACKSHOT"
)

// coreNote is the content of the STACKSHOT note.
type coreNote struct {
	Format    string          `json:"format"`
	Version   int             `json:"version"`
	Host      string          `json:"host"`
	Kernel    bool            `json:"kernel_frames"`
	Process   *ptrace.Process `json:"process"`
	StackLens []int           `json:"stack_lens"` // per thread: its stack window's length
}

// CoreOptions control WriteCore.
type CoreOptions struct {
	Host   string
	Kernel bool // the capture holds kernel stacks
	// Extra is memory beyond the captured stacks (CollectMemory).
	Extra []Segment
	// Owner is what NT_PRPSINFO (and NT_PRSTATUS, the parent) says of
	// the process besides its pid, state and name (zero: unknown).
	Owner CoreOwner
}

// CoreOwner is the process's parent, owner and command line, as
// NT_PRPSINFO carries them.
type CoreOwner struct {
	PPID, UID, GID int
	Args           string // the command line, arguments joined by spaces (80 bytes are kept)
}

// WriteCore writes an ELF core (ET_CORE, x86-64) of one captured process:
// NT_PRSTATUS per thread (its registers as captured; for a thread read
// without a stop, its PC, SP and system call arguments), NT_PRPSINFO,
// NT_AUXV, NT_FILE (every file mapping) and PT_LOAD segments for each
// stack window, the vdso and opts.Extra. Where ranges overlap, the stack
// windows win: they were copied while the thread was stopped.
func WriteCore(w io.Writer, p *ptrace.Process, opts CoreOptions) error {
	if p.Arch != arch.AMD64 {
		return fmt.Errorf("a core of architecture %q: not supported yet", p.Arch)
	}
	var img image
	ms := procmaps.Maps(p.Maps)
	for i := range p.Threads {
		th := &p.Threads[i]
		img.add(th.StackAddr, th.Stack)
	}
	if len(p.VDSO) > 0 {
		for i := range ms {
			if ms[i].Kind == procmaps.KindVDSO {
				img.add(ms[i].Start, p.VDSO)
				break
			}
		}
	}
	for _, s := range opts.Extra {
		img.add(s.Addr, s.Data)
	}
	notes, err := coreNotes(p, opts)
	if err != nil {
		return err
	}
	loads := img.loads(ms)
	if len(loads)+1 >= 0xffff {
		return fmt.Errorf("core would need %d segments (more than ELF's 65534)", len(loads)+1)
	}
	phnum := 1 + len(loads)
	off := uint64(64 + phnum*56)
	var hdr bytes.Buffer
	le := binary.LittleEndian
	// ELF header.
	ident := [16]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE)}
	hdr.Write(ident[:])
	binary.Write(&hdr, le, uint16(elf.ET_CORE))
	binary.Write(&hdr, le, uint16(coreMachine))
	binary.Write(&hdr, le, uint32(elf.EV_CURRENT))
	binary.Write(&hdr, le, uint64(0))  // entry
	binary.Write(&hdr, le, uint64(64)) // phoff
	binary.Write(&hdr, le, uint64(0))  // shoff
	binary.Write(&hdr, le, uint32(0))  // flags
	binary.Write(&hdr, le, uint16(64)) // ehsize
	binary.Write(&hdr, le, uint16(56)) // phentsize
	binary.Write(&hdr, le, uint16(phnum))
	binary.Write(&hdr, le, uint16(64)) // shentsize
	binary.Write(&hdr, le, uint16(0))  // shnum
	binary.Write(&hdr, le, uint16(0))  // shstrndx
	phdr := func(typ elf.ProgType, flags elf.ProgFlag, off, vaddr, filesz, memsz, align uint64) {
		binary.Write(&hdr, le, uint32(typ))
		binary.Write(&hdr, le, uint32(flags))
		for _, v := range []uint64{off, vaddr, 0, filesz, memsz, align} {
			binary.Write(&hdr, le, v)
		}
	}
	phdr(elf.PT_NOTE, 0, off, 0, uint64(len(notes)), 0, 4)
	off += uint64(len(notes))
	offs := make([]uint64, len(loads))
	for i, l := range loads {
		// File offset congruent with the address modulo the page size,
		// as loaders and readers of cores expect.
		off += (l.addr - off) % pageSize
		offs[i] = off
		phdr(elf.PT_LOAD, l.flags, off, l.addr, l.size, l.size, pageSize)
		off += l.size
	}
	if bb, ok := w.(*bytes.Buffer); ok {
		bb.Grow(int(off)) // one allocation for the whole core
	}
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	if _, err := w.Write(notes); err != nil {
		return err
	}
	pos := uint64(hdr.Len() + len(notes))
	var zeros [pageSize]byte
	for i, l := range loads {
		if _, err := w.Write(zeros[:offs[i]-pos]); err != nil {
			return err
		}
		pos = offs[i]
		for _, s := range l.pieces {
			if _, err := w.Write(s.Data); err != nil {
				return err
			}
			pos += uint64(len(s.Data))
		}
	}
	return nil
}

// coreNotes builds the PT_NOTE segment's content.
func coreNotes(p *ptrace.Process, opts CoreOptions) ([]byte, error) {
	var b bytes.Buffer
	// The main thread first: gdb and eu-stack take the first NT_PRSTATUS
	// for the process.
	order := make([]int, 0, len(p.Threads))
	for i := range p.Threads {
		if p.Threads[i].TID == p.PID {
			order = append([]int{i}, order...)
		} else {
			order = append(order, i)
		}
	}
	for k, i := range order {
		addNote(&b, noteCore, ntPrstatus, prstatus(p, &p.Threads[i], opts.Owner.PPID))
		if k == 0 {
			addNote(&b, noteCore, ntPrpsinfo, prpsinfo(p, opts.Owner))
			if len(p.Auxv) > 0 {
				addNote(&b, noteCore, ntAuxv, p.Auxv)
			}
			addNote(&b, noteCore, ntFile, fileNote(p))
		}
	}
	// The capture's own view: names, methods, kernel stacks.
	cp := *p
	cp.VDSO = nil
	cp.Threads = append([]ptrace.Thread(nil), p.Threads...)
	lens := make([]int, len(cp.Threads))
	for i := range cp.Threads {
		lens[i] = len(cp.Threads[i].Stack)
		cp.Threads[i].Stack = nil
	}
	js, err := json.Marshal(&coreNote{Format: Format, Version: Version, Host: opts.Host, Kernel: opts.Kernel, Process: &cp, StackLens: lens})
	if err != nil {
		return nil, err
	}
	addNote(&b, noteStackshot, ntStackshot, js)
	return b.Bytes(), nil
}

func addNote(b *bytes.Buffer, name string, typ uint32, desc []byte) {
	le := binary.LittleEndian
	binary.Write(b, le, uint32(len(name)+1))
	binary.Write(b, le, uint32(len(desc)))
	binary.Write(b, le, typ)
	b.WriteString(name)
	b.WriteByte(0)
	pad4(b)
	b.Write(desc)
	pad4(b)
}

func pad4(b *bytes.Buffer) {
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
}

// threadRegs returns a thread's registers as captured, or what /proc
// showed for a thread read without a stop (nil when nothing is known).
func threadRegs(th *ptrace.Thread) []uint64 {
	if len(th.Regs) >= arch.UserRegsCount {
		return th.Regs
	}
	if sc := th.Syscall; sc != nil && (sc.PC != 0 || sc.SP != 0) && !sc.Running {
		return syscallRegs(sc.Nr, sc.Args, sc.SP, sc.PC)
	}
	return nil
}

func prstatus(p *ptrace.Process, th *ptrace.Thread, ppid int) []byte {
	b := make([]byte, prstatusSize)
	le := binary.LittleEndian
	if th.Signal != 0 {
		le.PutUint32(b[prstatusSigno:], uint32(th.Signal))
		le.PutUint16(b[prstatusCursig:], uint16(th.Signal))
	}
	le.PutUint32(b[prstatusPID:], uint32(th.TID))
	le.PutUint32(b[prstatusPPID:], uint32(ppid))
	le.PutUint32(b[prstatusPgrp:], uint32(p.PID))
	if regs := threadRegs(th); regs != nil {
		putRegs(b, regs)
	}
	return b
}

func prpsinfo(p *ptrace.Process, o CoreOwner) []byte {
	b := make([]byte, prpsinfoSize)
	le := binary.LittleEndian
	if p.State != "" {
		b[prpsinfoSname] = p.State[0]
		b[prpsinfoState] = stateNumber(p.State[0])
	}
	le.PutUint32(b[prpsinfoUID:], uint32(o.UID))
	le.PutUint32(b[prpsinfoGID:], uint32(o.GID))
	le.PutUint32(b[prpsinfoPID:], uint32(p.PID))
	le.PutUint32(b[prpsinfoPPID:], uint32(o.PPID))
	copy(b[prpsinfoFname:prpsinfoFname+15], p.Comm)
	copy(b[prpsinfoPsargs:prpsinfoPsargs+79], cmp.Or(o.Args, p.Exe))
	return b
}

// stateNumber is the kernel's index of a state letter ("RSDTZW").
func stateNumber(c byte) byte {
	for i, s := range []byte("RSDTZW") {
		if s == c {
			return byte(i)
		}
	}
	return 0
}

// fileNote is NT_FILE: count, page size, then (start, end, offset in
// pages) per file mapping, then their names.
func fileNote(p *ptrace.Process) []byte {
	var hdr, names bytes.Buffer
	le := binary.LittleEndian
	n := 0
	for i := range p.Maps {
		m := &p.Maps[i]
		if m.Kind != procmaps.KindFile && m.Kind != procmaps.KindMemfd || m.Path == "" {
			continue
		}
		binary.Write(&hdr, le, m.Start)
		binary.Write(&hdr, le, m.End)
		binary.Write(&hdr, le, m.Offset/pageSize)
		names.WriteString(m.Path)
		names.WriteByte(0)
		n++
	}
	var b bytes.Buffer
	binary.Write(&b, le, uint64(n))
	binary.Write(&b, le, uint64(pageSize))
	b.Write(hdr.Bytes())
	b.Write(names.Bytes())
	return b.Bytes()
}

// image is a set of non-overlapping memory ranges; the first added wins.
type image struct {
	segs []Segment // sorted by Addr
}

func (im *image) add(addr uint64, data []byte) {
	if len(data) == 0 || addr+uint64(len(data)) < addr {
		return
	}
	end := addr + uint64(len(data))
	i := sort.Search(len(im.segs), func(i int) bool {
		s := im.segs[i]
		return s.Addr+uint64(len(s.Data)) > addr
	})
	var add []Segment
	cur := addr
	j := i
	for ; j < len(im.segs) && cur < end; j++ {
		s := im.segs[j]
		if s.Addr >= end {
			break
		}
		if s.Addr > cur {
			add = append(add, Segment{Addr: cur, Data: data[cur-addr : s.Addr-addr]})
		}
		cur = max(cur, s.Addr+uint64(len(s.Data)))
	}
	if cur < end {
		add = append(add, Segment{Addr: cur, Data: data[cur-addr:]})
	}
	if len(add) == 0 {
		return
	}
	// Splice: segs[i:j] and add interleave; both are sorted.
	run := append([]Segment(nil), im.segs[i:j]...)
	merged := make([]Segment, 0, len(run)+len(add))
	a, b := 0, 0
	for a < len(run) || b < len(add) {
		if b == len(add) || a < len(run) && run[a].Addr < add[b].Addr {
			merged = append(merged, run[a])
			a++
		} else {
			merged = append(merged, add[b])
			b++
		}
	}
	tail := append([]Segment(nil), im.segs[j:]...)
	im.segs = append(append(im.segs[:i], merged...), tail...)
}

type load struct {
	addr, size uint64
	flags      elf.ProgFlag
	pieces     []Segment
}

// loads joins adjacent ranges of the same permissions into PT_LOADs.
// Ranges are padded with zeros to whole pages where no other range is:
// readers of cores (elfutils) assume page-aligned segments.
func (im *image) loads(ms procmaps.Maps) []load {
	var segs []Segment
	var zero [pageSize]byte
	prevEnd := uint64(0)
	for i, s := range im.segs {
		end := s.Addr + uint64(len(s.Data))
		if lo := max(s.Addr&^(pageSize-1), prevEnd); lo < s.Addr {
			segs = append(segs, Segment{Addr: lo, Data: zero[:s.Addr-lo]})
		}
		segs = append(segs, s)
		hi := (end + pageSize - 1) &^ (pageSize - 1)
		if i+1 < len(im.segs) {
			hi = min(hi, im.segs[i+1].Addr)
		}
		if hi > end {
			segs = append(segs, Segment{Addr: end, Data: zero[:hi-end]})
		}
		prevEnd = max(hi, end)
	}
	var out []load
	for _, s := range segs {
		fl := elf.PF_R | elf.PF_W
		if m, ok := ms.Find(s.Addr); ok {
			fl = 0
			if m.Readable() {
				fl |= elf.PF_R
			}
			if m.Writable() {
				fl |= elf.PF_W
			}
			if m.Executable() {
				fl |= elf.PF_X
			}
		}
		if n := len(out); n > 0 && out[n-1].addr+out[n-1].size == s.Addr && out[n-1].flags == fl {
			out[n-1].size += uint64(len(s.Data))
			out[n-1].pieces = append(out[n-1].pieces, s)
			continue
		}
		out = append(out, load{addr: s.Addr, size: uint64(len(s.Data)), flags: fl, pieces: []Segment{s}})
	}
	return out
}
