package capfile

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"stackshot/internal/contain"
	"stackshot/procmaps"
	"stackshot/ptrace"
)

// Saved is one process of a saved capture, as the resolver reads it.
type Saved struct {
	Process *ptrace.Process
	// Mem reads a core's memory (its PT_LOAD segments); nil for a capture
	// file, whose memory is the stack copies in Process.
	Mem io.ReaderAt
	// Kernel says the capture holds kernel stacks.
	Kernel bool
	// Warnings are notes on the file itself (a truncated core, ...).
	Warnings []string
}

// Load reads a saved capture of any kind stackshot knows: its own capture
// file or an ELF core (stackshot's, gdb's gcore, the kernel's). A core's
// memory is read from r on demand: keep r open while Saved.Mem is used.
func Load(r io.ReaderAt, size int64) ([]Saved, error) {
	var magic [4]byte
	if n, _ := r.ReadAt(magic[:], 0); n == 4 && string(magic[:]) == elf.ELFMAG {
		c, err := ReadCore(r, size)
		if err != nil {
			return nil, err
		}
		return []Saved{*c}, nil
	}
	f, err := Decode(io.NewSectionReader(r, 0, size))
	if err != nil {
		return nil, err
	}
	out := make([]Saved, 0, len(f.Processes))
	for _, p := range f.Processes {
		out = append(out, Saved{Process: p, Kernel: f.Kernel})
	}
	return out, nil
}

// Limits on what ReadCore accepts.
const (
	maxCoreNotes   = 256 << 20 // bytes of PT_NOTE segments
	maxCoreThreads = 1 << 16
	maxFileEntries = 1 << 20
	// maxStackCopy bounds the stack window copied for a core's thread (the
	// unwinder reads past it through the core's memory).
	maxStackCopy = ptrace.DefaultStackBytes
)

// ErrCoreFormat is wrapped by every error about a malformed core.
var ErrCoreFormat = errors.New("malformed core")

func coreErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCoreFormat, fmt.Sprintf(format, args...))
}

type coreSeg struct {
	vaddr, memsz, off, filesz uint64
	flags                     elf.ProgFlag
}

// coreMem is a core's memory: io.ReaderAt over its PT_LOAD segments. Bytes
// a segment does not carry in the file (memsz past filesz: not dumped) are
// not available, so a reader falls back to the mapped file.
type coreMem struct {
	r    io.ReaderAt
	segs []coreSeg // sorted, non-overlapping
}

func (m *coreMem) ReadAt(p []byte, off int64) (int, error) {
	addr := uint64(off)
	n := 0
	for n < len(p) {
		a := addr + uint64(n)
		i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].vaddr+m.segs[i].filesz > a })
		if i == len(m.segs) || m.segs[i].vaddr > a {
			return n, fmt.Errorf("address %#x not in the core", a)
		}
		s := m.segs[i]
		k := min(uint64(len(p)-n), s.vaddr+s.filesz-a)
		got, err := m.r.ReadAt(p[n:n+int(k)], int64(s.off+(a-s.vaddr)))
		n += got
		if got < int(k) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// segment returns the segment holding addr with its bytes in the file.
func (m *coreMem) segment(addr uint64) (coreSeg, bool) {
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].vaddr+m.segs[i].filesz > addr })
	if i == len(m.segs) || m.segs[i].vaddr > addr {
		return coreSeg{}, false
	}
	return m.segs[i], true
}

type coreNoteRec struct {
	name string
	typ  uint32
	desc []byte
}

// ReadCore reads an x86-64 Linux ELF core: threads from NT_PRSTATUS,
// mappings from NT_FILE (and the PT_LOADs for anonymous memory), the
// auxiliary vector from NT_AUXV, memory from PT_LOAD. A core written by
// stackshot also carries the capture itself (thread names, methods, kernel
// stacks), which is used instead.
func ReadCore(r io.ReaderAt, size int64) (c *Saved, err error) {
	if perr := contain.Do("reading a core", func() error {
		c, err = readCore(r, size)
		return nil
	}); perr != nil {
		return nil, perr
	}
	return c, err
}

func readCore(r io.ReaderAt, size int64) (c *Saved, err error) {
	var eh [64]byte
	if n, _ := r.ReadAt(eh[:], 0); n != len(eh) {
		return nil, coreErr("truncated ELF header")
	}
	if string(eh[:4]) != elf.ELFMAG {
		return nil, fmt.Errorf("%w (no ELF magic)", ErrNotCapture)
	}
	le := binary.LittleEndian
	typ, machine := elf.Type(le.Uint16(eh[16:])), elf.Machine(le.Uint16(eh[18:]))
	if elf.Class(eh[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(eh[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return nil, unsupportedCore(eh[:])
	}
	if typ != elf.ET_CORE {
		return nil, fmt.Errorf("%w (an ELF file of type %v, not a core)", ErrNotCapture, typ)
	}
	ca, ok := coreArches[machine]
	if !ok {
		return nil, unsupportedCore(eh[:])
	}
	phoff, phent, phnum := le.Uint64(eh[32:]), uint64(le.Uint16(eh[54:])), uint64(le.Uint16(eh[56:]))
	if phent != 56 || phnum == 0 || phoff > uint64(size) || phnum*56 > uint64(size)-phoff {
		return nil, coreErr("program headers (offset %d, %d of %d bytes) outside the %d-byte file", phoff, phnum, phent, size)
	}
	ph := make([]byte, phnum*56)
	if n, _ := r.ReadAt(ph, int64(phoff)); n != len(ph) {
		return nil, coreErr("truncated program headers")
	}
	c = &Saved{}
	mem, notes, truncated, err := readSegments(r, size, ph)
	if err != nil {
		return nil, err
	}
	if truncated {
		c.Warnings = append(c.Warnings, "the core is truncated: some memory is missing")
	}
	c.Mem = mem
	for _, n := range notes {
		if n.name == noteStackshot && n.typ == ntStackshot {
			if err := c.fromStackshotNote(n.desc, mem, size); err != nil {
				return nil, err
			}
			return c, nil
		}
	}
	p, err := processFromNotes(ca, notes, mem, size)
	if err != nil {
		return nil, err
	}
	c.Process = p
	return c, nil
}

// readSegments reads the program headers' PT_LOADs (memory: bounds
// checked, sorted, not overlapping) and PT_NOTEs (parsed, bounded). A
// PT_LOAD past the file's end is cut to what is there (truncated).
func readSegments(r io.ReaderAt, size int64, ph []byte) (*coreMem, []coreNoteRec, bool, error) {
	le := binary.LittleEndian
	phnum := uint64(len(ph) / 56)
	mem := &coreMem{r: r}
	var notes []coreNoteRec
	noteBytes := uint64(0)
	truncated := false
	for i := uint64(0); i < phnum; i++ {
		e := ph[i*56:]
		s := coreSeg{flags: elf.ProgFlag(le.Uint32(e[4:])), off: le.Uint64(e[8:]), vaddr: le.Uint64(e[16:]),
			filesz: le.Uint64(e[32:]), memsz: le.Uint64(e[40:])}
		switch elf.ProgType(le.Uint32(e)) {
		case elf.PT_LOAD:
			if s.filesz > s.memsz || s.vaddr+s.memsz < s.vaddr {
				return nil, nil, false, coreErr("PT_LOAD %d: file size %d over memory size %d at %#x", i, s.filesz, s.memsz, s.vaddr)
			}
			if s.off > uint64(size) || s.filesz > uint64(size)-s.off {
				// A core cut short (a full disk, RLIMIT_CORE): keep what
				// is there.
				truncated = true
				s.filesz = uint64(max(0, size-int64(min(s.off, uint64(size)))))
			}
			mem.segs = append(mem.segs, s)
		case elf.PT_NOTE:
			if s.off > uint64(size) || s.filesz > uint64(size)-s.off {
				return nil, nil, false, coreErr("PT_NOTE %d (offset %d, %d bytes) past the end of the %d-byte file", i, s.off, s.filesz, size)
			}
			noteBytes += s.filesz
			if noteBytes > maxCoreNotes {
				return nil, nil, false, coreErr("more than %d MiB of notes", maxCoreNotes>>20)
			}
			b := make([]byte, s.filesz)
			if n, _ := r.ReadAt(b, int64(s.off)); n != len(b) {
				return nil, nil, false, coreErr("truncated PT_NOTE %d", i)
			}
			ns, err := parseNotes(b)
			if err != nil {
				return nil, nil, false, err
			}
			notes = append(notes, ns...)
		}
	}
	sort.Slice(mem.segs, func(a, b int) bool { return mem.segs[a].vaddr < mem.segs[b].vaddr })
	for i := 1; i < len(mem.segs); i++ {
		if p, s := mem.segs[i-1], mem.segs[i]; p.vaddr+p.memsz > s.vaddr {
			return nil, nil, false, coreErr("overlapping PT_LOAD segments at %#x and %#x", p.vaddr, s.vaddr)
		}
	}
	return mem, notes, truncated, nil
}

// parseNotes splits a PT_NOTE segment, checking each note's sizes against
// what is left of the segment.
func parseNotes(b []byte) ([]coreNoteRec, error) {
	le := binary.LittleEndian
	var out []coreNoteRec
	for off := 0; off+12 <= len(b); {
		namesz, descsz, typ := uint64(le.Uint32(b[off:])), uint64(le.Uint32(b[off+4:])), le.Uint32(b[off+8:])
		p := uint64(off + 12)
		nameEnd := p + namesz
		descOff := (nameEnd + 3) &^ 3
		descEnd := descOff + descsz
		if nameEnd > uint64(len(b)) || descOff > uint64(len(b)) || descEnd > uint64(len(b)) {
			return nil, coreErr("note at offset %d (name %d, desc %d bytes) runs past its %d-byte segment", off, namesz, descsz, len(b))
		}
		name := strings.TrimRight(string(b[p:nameEnd]), "\x00")
		out = append(out, coreNoteRec{name: name, typ: typ, desc: b[descOff:descEnd]})
		off = int((descEnd + 3) &^ 3)
	}
	return out, nil
}

// fromStackshotNote restores the capture a stackshot core carries, its
// stack windows and vdso read back from the core's memory.
//
// What is copied out of the file is bounded by the file's size: windows
// of distinct threads do not overlap, and a crafted note must not make
// one segment count a thousand times.
func (c *Saved) fromStackshotNote(desc []byte, mem *coreMem, size int64) error {
	g := &guard{r: bytes.NewReader(desc), budget: MaxDecompressed}
	var n coreNote
	if err := jsonDecode(g, &n); err != nil {
		return fmt.Errorf("stackshot note: %v", g.explain(err))
	}
	if n.Format != Format || n.Version != Version || n.Process == nil {
		return fmt.Errorf("stackshot note: format %q version %d: this stackshot reads %s version %d", n.Format, n.Version, Format, Version)
	}
	if err := checkProcess(n.Process); err != nil {
		return err
	}
	p := n.Process
	for i := range p.Threads {
		th := &p.Threads[i]
		if i >= len(n.StackLens) || n.StackLens[i] <= 0 {
			continue
		}
		l := min(n.StackLens[i], maxStackCopy)
		if s, ok := mem.segment(th.StackAddr); !ok || int64(l) > size || s.vaddr+s.filesz-th.StackAddr < uint64(l) {
			continue
		}
		size -= int64(l)
		buf := make([]byte, l)
		if k, _ := mem.ReadAt(buf, int64(th.StackAddr)); k == l {
			th.Stack = buf
		}
	}
	for i := range p.Maps {
		m := &p.Maps[i]
		if m.Kind == procmaps.KindVDSO && m.End > m.Start && m.End-m.Start <= 1<<20 && int64(m.End-m.Start) <= size {
			buf := make([]byte, m.End-m.Start)
			if k, _ := mem.ReadAt(buf, int64(m.Start)); k == len(buf) {
				p.VDSO = buf
			}
			break
		}
	}
	c.Process, c.Kernel = p, n.Kernel
	return nil
}

// Auxiliary vector tags read from a core.
const (
	atEntry       = 9
	atSysinfoEHDR = 33
)

// processFromNotes builds the capture of a core written by another tool.
// Stack copies are bounded by the file's size, as for stackshot's cores.
func processFromNotes(ca coreArch, notes []coreNoteRec, mem *coreMem, size int64) (*ptrace.Process, error) {
	le := binary.LittleEndian
	p := &ptrace.Process{Arch: ca.name}
	var files []procmaps.Mapping
	for _, n := range notes {
		if n.name != noteCore && n.name != "LINUX" {
			continue
		}
		switch n.typ {
		case ntPrstatus:
			if n.name != noteCore {
				continue
			}
			if len(n.desc) < ca.prstatusSize {
				return nil, coreErr("NT_PRSTATUS of %d bytes, want %d", len(n.desc), ca.prstatusSize)
			}
			if len(p.Threads) >= maxCoreThreads {
				return nil, coreErr("more than %d threads", maxCoreThreads)
			}
			th := ptrace.Thread{TID: int(int32(le.Uint32(n.desc[prstatusPID:]))), Method: ptrace.MethodCore,
				Regs: ca.regsOf(n.desc), Signal: int(le.Uint16(n.desc[prstatusCursig:]))}
			if ca.name == coreArches[elf.EM_X86_64].name {
				th.Syscall = syscallFromRegs(th.Regs)
			}
			p.Threads = append(p.Threads, th)
		case ntPrpsinfo:
			if len(n.desc) < prpsinfoSize {
				return nil, coreErr("NT_PRPSINFO of %d bytes, want %d", len(n.desc), prpsinfoSize)
			}
			p.PID = int(int32(le.Uint32(n.desc[prpsinfoPID:])))
			p.Comm = cstring(n.desc[prpsinfoFname : prpsinfoFname+16])
			// (a letter as /proc shows it: gdb's gcore writes 't', tracing
			// stop)
			if c := n.desc[prpsinfoSname]; c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' {
				p.State = string(c)
			}
		case ntSiginfo:
			if len(n.desc) >= 4 && p.FatalSignal == 0 {
				if sig := int(int32(le.Uint32(n.desc))); dumpsCore(sig) {
					p.FatalSignal = sig
				}
			}
		case ntAuxv:
			p.Auxv = append([]byte(nil), n.desc[:min(len(n.desc), procmaps.MaxAuxv)]...)
		case ntARMPACMask:
			if n.name == "LINUX" && len(n.desc) >= 16 {
				p.PACMask = le.Uint64(n.desc[8:])
			}
		case ntFile:
			fs, err := parseFileNote(n.desc)
			if err != nil {
				return nil, err
			}
			files = fs
		}
	}
	if len(p.Threads) == 0 {
		return nil, coreErr("no NT_PRSTATUS: no threads")
	}
	if p.PID == 0 {
		p.PID = p.Threads[0].TID
	}
	p.Maps = coreMaps(files, mem, auxvValue(p.Auxv, atSysinfoEHDR))
	ms := procmaps.Maps(p.Maps)
	if entry := auxvValue(p.Auxv, atEntry); entry != 0 {
		if m, ok := ms.Find(entry); ok && m.Kind == procmaps.KindFile {
			p.Exe = m.Path
		}
	}
	for i := range p.Threads {
		th := &p.Threads[i]
		sp := th.Regs[ca.sp]
		th.StackAddr = sp
		if s, ok := mem.segment(sp); ok {
			th.StackLo, th.StackHi = s.vaddr, s.vaddr+s.memsz
			l := min(s.vaddr+s.filesz-sp, maxStackCopy)
			if int64(l) > size {
				continue
			}
			size -= int64(l)
			buf := make([]byte, l)
			if k, _ := mem.ReadAt(buf, int64(sp)); uint64(k) == l {
				th.Stack = buf
			}
		}
		if th.Name == "" {
			th.Name = p.Comm
		}
	}
	return p, nil
}

// parseFileNote parses NT_FILE: count, page size, count × (start, end,
// page offset), then count file names.
func parseFileNote(b []byte) ([]procmaps.Mapping, error) {
	le := binary.LittleEndian
	if len(b) < 16 {
		return nil, coreErr("NT_FILE of %d bytes", len(b))
	}
	count, page := le.Uint64(b), le.Uint64(b[8:])
	if count > maxFileEntries || count*24 > uint64(len(b)-16) {
		return nil, coreErr("NT_FILE claims %d entries in %d bytes", count, len(b))
	}
	if page == 0 || page&(page-1) != 0 || page > 1<<30 {
		return nil, coreErr("NT_FILE page size %d", page)
	}
	names := b[16+count*24:]
	out := make([]procmaps.Mapping, 0, count)
	for i := uint64(0); i < count; i++ {
		e := b[16+i*24:]
		start, end, off := le.Uint64(e), le.Uint64(e[8:]), le.Uint64(e[16:])
		k := bytes.IndexByte(names, 0)
		if k < 0 {
			return nil, coreErr("NT_FILE: %d names for %d entries", i, count)
		}
		name := string(names[:k])
		names = names[k+1:]
		if end <= start || off > (1<<64-1)/page {
			return nil, coreErr("NT_FILE entry %d: %#x-%#x offset %d pages", i, start, end, off)
		}
		m := procmaps.Mapping{Start: start, End: end, Offset: off * page, Kind: procmaps.KindFile}
		m.Path, m.Deleted = strings.CutSuffix(name, " (deleted)")
		if strings.HasPrefix(m.Path, "/memfd:") {
			m.Kind = procmaps.KindMemfd
		}
		out = append(out, m)
	}
	return out, nil
}

// coreMaps joins NT_FILE's file mappings with the PT_LOADs (permissions
// for each, and the anonymous mappings), in address order.
func coreMaps(files []procmaps.Mapping, mem *coreMem, vdso uint64) []procmaps.Mapping {
	perms := func(start uint64) string {
		i := sort.Search(len(mem.segs), func(i int) bool { return mem.segs[i].vaddr+mem.segs[i].memsz > start })
		if i == len(mem.segs) || mem.segs[i].vaddr > start {
			// Not in the core at all (gcore leaves out read-only file
			// mappings): code may be there; the module's own CFI and
			// segments decide.
			return "r-xp"
		}
		f := mem.segs[i].flags
		b := []byte("---p")
		if f&elf.PF_R != 0 {
			b[0] = 'r'
		}
		if f&elf.PF_W != 0 {
			b[1] = 'w'
		}
		if f&elf.PF_X != 0 {
			b[2] = 'x'
		}
		return string(b)
	}
	out := append([]procmaps.Mapping(nil), files...)
	for i := range out {
		out[i].Perms = perms(out[i].Start)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Start < out[b].Start })
	fm := procmaps.Maps(out)
	for _, s := range mem.segs {
		if _, ok := fm.Find(s.vaddr); ok {
			continue
		}
		m := procmaps.Mapping{Start: s.vaddr, End: s.vaddr + s.memsz, Kind: procmaps.KindAnon}
		m.Perms = perms(s.vaddr)
		if vdso != 0 && s.vaddr == vdso {
			m.Kind, m.Path = procmaps.KindVDSO, "[vdso]"
		}
		out = append(out, m)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Start < out[b].Start })
	return out
}

func auxvValue(auxv []byte, tag uint64) uint64 {
	for i := 0; i+16 <= len(auxv); i += 16 {
		t := binary.LittleEndian.Uint64(auxv[i:])
		if t == atNull {
			break
		}
		if t == tag {
			return binary.LittleEndian.Uint64(auxv[i+8:])
		}
	}
	return 0
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Tasks is the set of p's threads: a saved process's lock owner must be
// one of them (diagnose), whichever of them are shown.
func Tasks(p *ptrace.Process) map[int]bool {
	out := make(map[int]bool, len(p.Threads))
	for i := range p.Threads {
		out[p.Threads[i].TID] = true
	}
	return out
}

// unsupportedCore says which machine's core the ELF header eh is of (its
// class and byte order taken into account: s390x's is big-endian) and
// that it is not read.
func unsupportedCore(eh []byte) error {
	var order binary.ByteOrder = binary.LittleEndian
	if elf.Data(eh[elf.EI_DATA]) == elf.ELFDATA2MSB {
		order = binary.BigEndian
	}
	class, m := elf.Class(eh[elf.EI_CLASS]), elf.Machine(order.Uint16(eh[18:]))
	name := m.String()
	switch {
	case m == elf.EM_386:
		name = "i386"
	case m == elf.EM_X86_64 && class == elf.ELFCLASS32:
		name = "x32"
	case m == elf.EM_ARM:
		name = "32-bit arm"
	case m == elf.EM_PPC64 && order == binary.LittleEndian:
		name = "ppc64le"
	case m == elf.EM_PPC64:
		name = "ppc64"
	case m == elf.EM_S390:
		name = "s390x"
	case m == elf.EM_RISCV:
		name = "riscv64"
	}
	return fmt.Errorf("a core of %s programs (%v, %v, %v): not supported (this stackshot reads x86-64 and aarch64 cores; read it with the debugger of that machine)",
		name, m, class, elf.Data(eh[elf.EI_DATA]))
}
