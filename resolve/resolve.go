package resolve

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"stackshot/internal/arch"
	"stackshot/internal/contain"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/symtab"
	"stackshot/unwind"
)

// Options control unwinding and symbolization.
type Options struct {
	MaxFrames int  // per thread (0: unwind.DefaultMaxFrames)
	Kernel    bool // include kernel frames
	Live      bool // the target is alive: read through /proc/PID/map_files and root
	// KernelAddrs fills in kernel frames' addresses hidden by the stack
	// file, from /proc/kallsyms (one read of it: about 0.1 s).
	KernelAddrs bool
	// Sysroot is where a saved capture's files are looked up first ("" or
	// "/": the host's root).
	Sysroot string
	// Exe is report -e: the saved capture's main executable, used in
	// place of the path the capture names (checked by build id where
	// the capture has one).
	Exe string
	// Sampler: the resolver unwinds many samples of the same modules, so
	// each module's CFI is compiled whole once (a lookup is then a binary
	// search). Otherwise (a one-off dump) only the FDEs of the PCs met are
	// compiled, found through .eh_frame_hdr (unwind.LoadTableLazy).
	Sampler bool
	// NoJava leaves a JVM's Java frames, thread names and monitors out
	// (--no-java); its code cache is still read for the frames' layouts,
	// so the native frames below the Java ones are kept.
	NoJava bool
}

// Resolver unwinds and symbolizes captures. It caches modules and compiled
// CFI tables across threads, samples and processes; it is safe for use by
// one goroutine at a time.
type Resolver struct {
	sym    *symtab.Symbolizer
	opts   Options
	mu     sync.Mutex
	tables map[string]*tableEntry // by build id, else path+dev+inode
	kall   *symtab.Kallsyms
	kallOK bool
	frames []unwind.Frame
	syms   []symtab.Sym
	kaddr  map[string]uint64 // kernel symbol addresses found so far
	// checked: the no-stop check's walks of the latest capture, for its
	// resolution.
	checked checkedWalks
}

type tableEntry struct {
	t   *unwind.Table
	err error
}

// NewResolver returns a Resolver using sym for names.
func NewResolver(sym *symtab.Symbolizer, opts Options) *Resolver {
	if opts.MaxFrames <= 0 {
		opts.MaxFrames = unwind.DefaultMaxFrames
	}
	return &Resolver{sym: sym, opts: opts, tables: map[string]*tableEntry{}}
}

// Space is one process's address space as the unwinder sees it, with the
// modules it has opened. A sampler keeps it across ticks (see Update).
type Space struct {
	r    *Resolver
	p    *ptrace.Process
	maps procmaps.Maps
	mods map[uint64]*modEntry           // by mapping start
	mem  io.ReaderAt                    // live memory, or nil
	code map[uint64]*[codePageSize]byte // pages of live code read (see ReadCode)
	vdso *symtab.Module
	// missing and warnings: modules not found, said once each.
	missing  map[string]bool
	warnings []string
	// named: the frames a module gave each PC named so far (userFrame),
	// in namedFrames.
	named       map[namedKey]namedRange
	namedFrames []report.Frame
	// The key last looked up there, and its answer (a recursion asks
	// for one key over and over).
	lastKey     namedKey
	lastNamed   namedRange
	lastNamedOK bool
	java        javaState // the process's JVM (java.go)
}

type namedKey struct {
	pc            uint64
	method        unwind.Method
	exact, signal bool
}

type namedRange struct{ from, to int }

// maxNamed bounds the PCs a space keeps the names of (a sampler's space
// lives for the whole recording); past it the memo starts over.
const maxNamed = 4096

// keepNamed keeps the logical frames fr of a PC's key.
func (s *Space) keepNamed(key namedKey, fr []report.Frame) {
	if len(s.named) >= maxNamed {
		clear(s.named)
		s.namedFrames = s.namedFrames[:0]
	}
	s.lastNamedOK = false
	if s.named == nil {
		s.named = map[namedKey]namedRange{}
	}
	from := len(s.namedFrames)
	s.namedFrames = append(s.namedFrames, fr...)
	s.named[key] = namedRange{from, len(s.namedFrames)}
}

type modEntry struct {
	mod   *symtab.Module
	table *unwind.Table
	gof   unwind.GoFrames // Go frame sizes, or nil
	bias  uint64
	ok    bool // bias known
	err   error
	// missing: no file for the module was found (saved captures).
	missing bool
}

// Space builds the address space of a capture. mem reads the live target's
// memory (nil for a saved capture).
func (r *Resolver) Space(p *ptrace.Process, mem io.ReaderAt) *Space {
	return &Space{r: r, p: p, maps: procmaps.Maps(p.Maps), mods: map[uint64]*modEntry{}, mem: mem}
}

// Update points the space at a newer capture of the same process; the
// opened modules are kept while the maps are the same ones.
func (s *Space) Update(p *ptrace.Process) {
	same := len(p.Maps) == len(s.p.Maps) && (len(p.Maps) == 0 || &p.Maps[0] == &s.p.Maps[0])
	s.p = p
	clear(s.code) // code may have changed since (JIT, a library reloaded)
	if !same {
		s.maps = procmaps.Maps(p.Maps)
		s.mods = map[uint64]*modEntry{}
		clear(s.named)
		s.namedFrames = s.namedFrames[:0]
		s.lastNamedOK = false
	}
}

// noteMissing records, once per file, a module a saved capture's report
// has no file for.
func (s *Space) noteMissing(ref symtab.ModuleRef) {
	if s.missing == nil {
		s.missing = map[string]bool{}
	}
	if s.missing[ref.Path] {
		return
	}
	s.missing[ref.Path] = true
	id := ref.BuildID
	if id == "" {
		id = "unknown"
	}
	where := "on this machine"
	if s.r.opts.Sysroot != "" && s.r.opts.Sysroot != "/" {
		where = "under " + s.r.opts.Sysroot + " or on this machine"
	}
	s.warnings = append(s.warnings, fmt.Sprintf("module %s (build id %s) not found %s: its frames have no names (copy the file, or give --sysroot)", ref.Path, id, where))
}

// noteForeign says once that the file found for a module is another
// machine's (a core read on a machine of another architecture without
// --sysroot).
func (s *Space) noteForeign(path string, m elf.Machine) {
	if s.missing == nil {
		s.missing = map[string]bool{}
	}
	if s.missing[path] {
		return
	}
	s.missing[path] = true
	s.warnings = append(s.warnings, fmt.Sprintf("module %s: the file found is for %v, the capture is of %s: not used, its frames have no names (give --sysroot with the %s files)",
		path, m, s.p.Arch, s.p.Arch))
}

// foreignMachine reports the machine of mod's file when it is not the
// one the capture's architecture runs. A file that is not the one mapped
// (its build id differs: another machine's file of the same name, say)
// is opened again for its header. A live process's are this machine's.
func (s *Space) foreignMachine(mod *symtab.Module, path string) (elf.Machine, bool) {
	if s.r.opts.Live {
		return 0, false // (a live process runs on this machine)
	}
	f := mod.ELF()
	if mod.Mismatch() {
		of, err := s.r.sym.OpenModule(s.r.opts.Sysroot, path)
		if err != nil {
			return 0, false
		}
		defer of.Close()
		f = of
	}
	if f == nil {
		return 0, false
	}
	var eh [20]byte
	if n, _ := f.ReadAt(eh[:], 0); n != len(eh) || string(eh[:4]) != elf.ELFMAG || elf.Data(eh[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return 0, false
	}
	m := elf.Machine(binary.LittleEndian.Uint16(eh[18:]))
	want := elf.EM_X86_64
	if s.p.Arch == arch.ARM64 {
		want = elf.EM_AARCH64
	}
	return m, m != want
}

// Missing reports whether addr lies outside every known mapping (the maps
// may be stale).
func (s *Space) Missing(addr uint64) bool {
	_, ok := s.maps.Find(addr)
	return !ok
}

func (s *Space) module(m *procmaps.Mapping) *modEntry {
	if e, ok := s.mods[m.Start]; ok {
		return e
	}
	e := &modEntry{}
	s.mods[m.Start] = e
	switch {
	case m.Kind == procmaps.KindVDSO:
		if len(s.p.VDSO) == 0 {
			e.err = fmt.Errorf("vdso image not captured")
			return e
		}
		mod, err := s.r.sym.ModuleFromImage(s.p.VDSO, "[vdso]")
		if err != nil {
			e.err = err
			return e
		}
		e.mod = mod
		e.table = s.r.table("vdso:"+mod.BuildID()+":"+strconv.Itoa(len(s.p.VDSO)), func() (*unwind.Table, error) {
			return s.r.loadTable(bytes.NewReader(s.p.VDSO))
		})
		if b, ok := mod.MappingBias(m.Start, m.End, m.Offset); ok {
			e.bias, e.ok = b, true
		}
		return e
	case m.Kind == procmaps.KindFile || (m.Kind == procmaps.KindOther && m.Inode != 0) || m.Kind == procmaps.KindMemfd:
	default:
		e.err = fmt.Errorf("no file")
		return e
	}
	first := s.maps.FirstOfFile(m)
	ref := s.moduleRef(m, first)
	mod, err := s.r.sym.Module(ref)
	if err != nil {
		e.err = err
		e.missing = errors.Is(err, symtab.ErrNotFound)
		if e.missing && !s.r.opts.Live {
			s.noteMissing(ref)
		}
		return e
	}
	if m, ok := s.foreignMachine(mod, ref.Path); ok {
		e.err = fmt.Errorf("a file for %v", m)
		e.missing = true
		s.noteForeign(ref.Path, m)
		return e
	}
	e.mod = mod
	// The segment the loader mapped here (not merely the one holding the
	// mapping's first file byte, which may end a previous segment).
	if b, ok := mod.MappingBias(m.Start, m.End, m.Offset); ok {
		e.bias, e.ok = b, true
	} else if first != m {
		// One object has one load bias: a stand-in debug file (its
		// segments have no file offsets of their own) is placed by the
		// mapping of the file's start.
		if b, ok := mod.MappingBias(first.Start, first.End, first.Offset); ok {
			e.bias, e.ok = b, true
		}
	}
	if gf := mod.GoFrames(); gf != nil {
		e.gof = gf
	}
	if !mod.Mismatch() {
		key := mod.BuildID()
		if key == "" {
			key = fmt.Sprintf("%s:%d:%d", m.Path, ref.Dev, ref.Inode)
		}
		e.table = s.r.table(key, func() (*unwind.Table, error) {
			bin := mod.ELF()
			if bin == nil {
				return nil, fmt.Errorf("no binary")
			}
			// .eh_frame (or .debug_frame in the binary) first: opening the
			// separate debug file costs far more, and is needed only when
			// the binary carries no CFI at all.
			t, err := s.r.loadTable(bin)
			if err == nil && t.Len() > 0 {
				return t, nil
			}
			if dbg := mod.DebugELF(); dbg != nil {
				return unwind.LoadTableLimited(s.r.sym.Context(), bin, dbg, s.r.sym.Budget())
			}
			return t, err
		})
	}
	return e
}

// loadTable loads the CFI of a module's binary: compiled whole for a
// sampler, looked up per FDE otherwise.
func (r *Resolver) loadTable(bin io.ReaderAt) (*unwind.Table, error) {
	if r.opts.Sampler {
		return unwind.LoadTableLimited(r.sym.Context(), bin, nil, r.sym.Budget())
	}
	return unwind.LoadTableLazy(r.sym.Context(), bin, r.sym.Budget())
}

func (r *Resolver) table(key string, load func() (*unwind.Table, error)) *unwind.Table {
	r.mu.Lock()
	e, ok := r.tables[key]
	r.mu.Unlock()
	if ok {
		return e.t
	}
	t, err := safeLoad(load)
	r.mu.Lock()
	r.tables[key] = &tableEntry{t: t, err: err}
	r.mu.Unlock()
	return t
}

func safeLoad(load func() (*unwind.Table, error)) (t *unwind.Table, err error) {
	err = contain.Do("loading cfi", func() error {
		t, err = load()
		return err
	})
	return t, err
}

// Lookup implements unwind.Space.
func (s *Space) Lookup(addr uint64) (unwind.ModuleInfo, bool) {
	m, ok := s.maps.Find(addr)
	if !ok {
		return unwind.ModuleInfo{}, false
	}
	mi := unwind.ModuleInfo{Start: m.Start, End: m.End, Exec: m.Executable()}
	if !mi.Exec {
		return mi, true
	}
	e := s.module(m)
	if e.ok && e.table != nil {
		mi.CFI, mi.Bias = e.table, e.bias
	}
	// A saved capture whose module file is missing or another build: its
	// code is unknown; the unwinder stops there instead of guessing.
	// So is one only a separate debug file stands in for.
	mi.NoModule = !s.r.opts.Live && (e.missing || e.mod != nil && (e.mod.Mismatch() || e.mod.ELF() == nil))
	if e.ok && e.gof != nil {
		mi.Go, mi.Bias = e.gof, e.bias
	}
	if e.mod == nil {
		if vm := s.jvm(); vm != nil && vm.InCodeCache(addr) {
			mi.JIT = jitCode{vm}
		}
	}
	return mi, true
}

// ReadCode implements unwind.Space: from the target's memory (live, or a
// core's when it holds the code), else the module file. Live code is read
// a page at a time and kept until the space is updated: the unwinder checks
// the instruction before every return address it considers, and a deep
// stack repeats the same few return addresses (a 1,000-frame recursion cost
// 2,000 process_vm_readv calls).
func (s *Space) ReadCode(p []byte, addr uint64) (int, error) {
	if s.mem != nil && s.r.opts.Live {
		return s.readLiveCode(p, addr)
	}
	if s.mem != nil {
		if n, err := s.mem.ReadAt(p, int64(addr)); n == len(p) {
			return n, err
		}
	}
	m, ok := s.maps.Find(addr)
	if !ok {
		return 0, fmt.Errorf("no mapping at %#x", addr)
	}
	if m.Kind == procmaps.KindVDSO && len(s.p.VDSO) > 0 {
		off := addr - m.Start
		if off >= uint64(len(s.p.VDSO)) {
			return 0, io.EOF
		}
		return copy(p, s.p.VDSO[off:]), nil
	}
	e := s.module(m)
	if e.mod == nil || e.mod.ELF() == nil {
		return 0, fmt.Errorf("no file for %#x", addr)
	}
	return e.mod.ELF().ReadAt(p, int64(addr-m.Start+m.Offset))
}

// ReadMemory implements unwind.Memory for live targets.
func (s *Space) ReadMemory(p []byte, addr uint64) (int, error) {
	if s.mem == nil {
		return 0, fmt.Errorf("no live memory")
	}
	return s.mem.ReadAt(p, int64(addr))
}

// input builds the unwinder's input for a thread; ok is false when the
// thread has no user registers to start from.
func (s *Space) input(th *ptrace.Thread) (unwind.Input, bool) {
	in := unwind.Input{Space: s, MaxFrames: s.r.opts.MaxFrames}
	switch {
	case s.p.Arch == arch.ARM64:
		in.Arch, in.PACMask = unwind.ArchARM64, s.p.PACMask
		switch {
		case len(th.Regs) >= arch.ARM64UserRegsCount:
			in.Regs = unwind.RegsFromUserARM64(th.Regs)
		case th.Method == ptrace.MethodNoStop && th.Syscall != nil:
			in.Regs = unwind.RegsFromSyscallARM64(th.Syscall.SP, th.Syscall.PC)
		default:
			return in, false
		}
	case len(th.Regs) >= unwind.UserRegsCount:
		in.Regs = unwind.RegsFromUser(th.Regs)
	case th.Method == ptrace.MethodNoStop && th.Syscall != nil:
		in.Regs = unwind.RegsFromSyscall(th.Syscall.SP, th.Syscall.PC, th.Syscall.Args)
	default:
		return in, false
	}
	in.Stack = unwind.Stack{Addr: th.StackAddr, Data: th.Stack}
	in.StackLo, in.StackHi = th.StackLo, th.StackHi
	switch {
	case s.mem != nil && s.r.opts.Live:
		in.Mem = stackFence{mem: s, lo: th.StackLo, hi: th.StackHi}
	case s.mem != nil:
		in.Mem = s // a core's memory: what it saved is all there is
	}
	return in, true
}

// stackFence keeps the unwinder's live reads out of the thread's stack
// mapping [lo, hi): the stack is read only through its copy, which
// --stack-bytes bounds (the walker serves reads inside the copy itself).
type stackFence struct {
	mem    unwind.Memory
	lo, hi uint64
}

func (f stackFence) ReadMemory(p []byte, addr uint64) (int, error) {
	if end := addr + uint64(len(p)); addr < f.hi && end > f.lo {
		return 0, fmt.Errorf("%#x lies in the thread's stack beyond its copy", addr)
	}
	return f.mem.ReadMemory(p, addr)
}

// Unwind walks one thread's captured stack.
func (s *Space) Unwind(th *ptrace.Thread, out []unwind.Frame) ([]unwind.Frame, unwind.StopReason, bool) {
	if unwindHook != nil {
		unwindHook(th.TID)
	}
	if fr, stop, ok := s.r.checked.take(s, th, out); ok {
		return fr, stop, true
	}
	in, ok := s.input(th)
	if !ok {
		return out, unwind.StopNone, false
	}
	fr, stop := unwind.Unwind(&in, out)
	return fr, stop, true
}

// CheckNoStop reports whether a thread captured without a stop unwinds
// completely: if not, an auto-mode capture stops it instead.
func (s *Space) CheckNoStop(th *ptrace.Thread) (complete bool) {
	if th.Torn {
		return false
	}
	// This runs inside the capture: a panic must not reach it. A walk
	// that panics is not complete; the thread is stopped and resolved
	// later, where the panic becomes its error (safeThread).
	if contain.Call("checking a stack", func() { complete = s.checkNoStop(th) }) != nil {
		s.r.frames = nil
		return false
	}
	return complete
}

func (s *Space) checkNoStop(th *ptrace.Thread) bool {
	fr, stop, ok := s.Unwind(th, s.r.frames[:0])
	s.r.frames = fr
	if !ok {
		return false
	}
	s.r.checked.keep(s, th, fr, stop)
	switch stop {
	case unwind.StopEnd, unwind.StopPCZero:
		return true
	case unwind.StopMaxFrames, unwind.StopStackCopy:
		// A stop would give no more: the limit is ours, not the registers'.
		return true
	}
	// A walk that ends at a thread or goroutine root, or fails past a Go
	// stack switch, is complete too.
	var names []report.Frame
	for _, f := range fr {
		names = s.r.userFrame(s, names, f)
	}
	return endsAtRoot(names)
}

// rootPath is the target's view of the filesystem root, through a live
// thread when the main thread has exited.
func rootPath(p *ptrace.Process) string {
	if p.MemTID != 0 {
		return procmaps.TaskRootPath(p.PID, p.MemTID)
	}
	return procmaps.RootPath(p.PID)
}

const (
	codePageSize = 4096
	maxCodePages = 256 // 1 MiB of code kept per space
)

// readLiveCode reads live memory through the space's page cache. A page
// that cannot be read whole (the end of a mapping) is not cached: the read
// goes to memory directly.
func (s *Space) readLiveCode(p []byte, addr uint64) (int, error) {
	n := 0
	for n < len(p) {
		a := addr + uint64(n)
		if a < addr {
			break // wrapped
		}
		page := a &^ (codePageSize - 1)
		buf, ok := s.code[page]
		if !ok {
			if len(s.code) >= maxCodePages {
				clear(s.code)
			}
			if s.code == nil {
				s.code = map[uint64]*[codePageSize]byte{}
			}
			buf = new([codePageSize]byte)
			if m, err := s.mem.ReadAt(buf[:], int64(page)); m != codePageSize || err != nil {
				m, err := s.mem.ReadAt(p[n:], int64(a))
				return n + m, err
			}
			s.code[page] = buf
		}
		n += copy(p[n:], buf[a-page:])
	}
	return n, nil
}
