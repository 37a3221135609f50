// Package symtab turns (module, address) into function, file, line and
// inlined callers.
//
// Sources, best first: DWARF (function names, file:line, inlined
// subroutines; DWARF 2-5, compressed sections), Go .gopclntab, .symtab of
// the binary or of its separate debug file, MiniDebugInfo (.gnu_debugdata),
// .dynsym. JIT code is named by perf maps (/tmp/perf-PID.map) and kernel
// addresses by /proc/kallsyms.
//
// Every file is checked against the build id seen in the target's memory
// before its symbols are used; everything loaded is cached by build id,
// then by device+inode, and DWARF is decoded lazily per compilation unit.
//
// Use: for a pc in a mapping [start, end) at file offset off (from
// /proc/PID/maps),
//
//	m, err := s.Module(ref)                  // cached; check m.Mismatch()
//	bias, ok := m.MappingBias(start, end, off) // or FileOffsetToVaddr(pc-start+off)
//	syms = m.Lookup(pc-bias, syms[:0])        // pc-1 for return addresses
//
// JIT code in anonymous mappings: s.PerfMapFor(pid, root).Lookup(pc)
// (offline, root "": only a map given by Options.PerfMap or AddPerfMap);
// kernel addresses: LoadKallsyms("/proc/kallsyms") then Lookup.
//
// Specs: ELF gABI and the GNU extensions (build-id notes, .gnu_debuglink,
// .gnu_debugaltlink, .gnu_debugdata), DWARF 2-5 (line programs, DIE
// trees, .debug_aranges, range lists), the Go 1.2-1.26 pclntab (inline
// trees from Go 1.20).
//
// Robustness: every file is target-controlled input. Target paths are
// resolved inside the target's root (openat2 RESOLVE_IN_ROOT), once, and
// opened only when regular (see openIn). ELF headers are checked before
// debug/elf reads them, and every section, perf map and decompressed image
// is read within one budget per Symbolizer (Options.MaxDebugBytes,
// MaxSectionBytes), charged before allocation (internal/safeelf).
// Options.Context bounds the time spent. A panic while loading or looking
// up a module (debug/elf, debug/dwarf and debug/gosym are not hardened)
// costs that module its names, nothing else.
package symtab

import (
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"stackshot/internal/bin"
	"stackshot/internal/contain"
	"stackshot/internal/diskcache"
	"stackshot/internal/safeelf"
)

// ErrNoSymbols means the module has no usable symbol source.
var ErrNoSymbols = errors.New("no symbols")

// ErrNoBuildID means the file carries no GNU build id note.
var ErrNoBuildID = errors.New("no build id")

// ErrNotFound means no file for the module could be opened.
var ErrNotFound = errors.New("module file not found")

// FormatError reports malformed input in a file (the project's one format
// error, shared with unwind).
type FormatError = bin.FormatError

// ErrBudget means a file needed more memory than the debug-data budget
// left (Options.MaxDebugBytes, MaxSectionBytes): its names were given up.
var ErrBudget = safeelf.ErrBudget

// Options configure a Symbolizer.
type Options struct {
	DebugDirs  []string // roots for separate debug files; /usr/lib/debug is always searched
	NoDemangle bool     // keep raw symbol names
	// NamesOnly skips DWARF: function names come from the symbol tables
	// (and the Go pclntab), without file, line or inlined frames. For
	// plain pstack-style text, where the debug info's cost buys nothing.
	NamesOnly bool

	// MaxDebugBytes bounds everything read into memory from module and
	// debug files and perf maps over the Symbolizer's life (0: 512 MiB);
	// MaxSectionBytes bounds one section, decompressed (0: 256 MiB, or
	// half of a larger MaxDebugBytes; at most MaxDebugBytes).
	// Sizes are checked before anything is allocated; a file that needs
	// more loses its names, the rest of the run goes on.
	MaxDebugBytes   int64
	MaxSectionBytes int64

	// Context bounds symbolization in time: once it is done (a --timeout
	// deadline, an interrupt) no more files are opened or decoded and
	// addresses not yet resolved stay unresolved (see Expired). nil: no
	// bound.
	Context context.Context

	// PerfMap is the perf map to use for JIT code when no live root is
	// given (a saved capture, with report --perf-map FILE); "" none.
	// For live targets the target's own /tmp/perf-PID.map is used.
	PerfMap string

	// FetchDebug, when set, is asked for a module's separate debug file by
	// build id when none is on disk and the binary has no DWARF of its own
	// (debuginfod); FetchExecutable for a module's file itself when it is
	// not on disk (a saved capture on another machine). Each returns a
	// host path, checked like any other file. They run only while
	// symbolizing, never during a capture's stop. nil: nothing fetched.
	FetchDebug      func(ctx context.Context, buildID string) (path string, err error)
	FetchExecutable func(ctx context.Context, buildID string) (path string, err error)
	// Opener opens every file the Symbolizer reads (nil: SystemOpener).
	Opener Opener

	// Cache keeps what is expensive to rebuild (decompressed debug
	// sections) between runs, keyed by build id and file identity
	// (a *diskcache.Cache). nil: nothing cached.
	Cache Cache
}

// Cache is a store of payloads by key that checks what it returns
// (diskcache.Cache); what it returns is still parsed as hostile.
type Cache interface {
	Get(k diskcache.Key, max int64) ([]byte, bool)
	Put(k diskcache.Key, payload []byte) error
}

// CacheKinds are the kinds of the keys a Symbolizer asks a Cache for
// (diskcache.Key.Kind): a sandboxed parser's parent refuses any other.
var CacheKinds = []string{"section", kindDWARFIndex, kindDWARFUnits, kindSymbols}

// ModuleRef says how to find the file behind a mapping of a target process.
type ModuleRef struct {
	Path     string // path as the target sees it, " (deleted)" trimmed
	MapFiles string // "/proc/PID/map_files/START-END", or "" (saved capture / not available)
	Root     string // "/proc/PID/root", or "" for the host's root
	// ThenHost: Root is a sysroot an operator gave for a saved capture;
	// the host's own path is a candidate after it (checked by build id).
	ThenHost bool
	// SharedRoot: Root is the host's own root (the target has stackshot's
	// mount namespace and root directory): a file looked for by name on
	// the host (a debug file, a build-id link) is not looked for again
	// inside Root.
	SharedRoot bool
	Dev        uint64 // device of the mapped file (unix.Mkdev(major, minor)); 0 unknown
	Inode      uint64 // inode of the mapped file; 0 unknown
	BuildID    string // hex build id read from the target's memory; "" unknown
}

// searchRoot is the root a file looked for by name is also looked for in,
// after the host: "" when there is none but the host's.
func (r ModuleRef) searchRoot() string {
	if r.SharedRoot || r.Root == "/" {
		return ""
	}
	return r.Root
}

// Sym is one logical frame at an address: innermost (inlined) first.
type Sym struct {
	Function string // demangled unless NoDemangle; "" unknown
	Offset   uint64 // address minus the function's start (physical function only)
	File     string // "" unknown
	Line     int
	Inlined  bool // this function was inlined into the next Sym
}

type devIno struct{ dev, ino uint64 }

// Symbolizer loads and caches modules (by build id, then dev+inode). It is
// safe for concurrent use.
type Symbolizer struct {
	opts   Options
	budget *safeelf.Budget

	expiredFlag atomic.Bool // a lookup was cut short by the Context
	limitFlag   atomic.Bool // a file was refused for the budget

	packMu sync.Mutex
	packs  []*dwarfIndex  // modules whose decoded units go to the cache
	writes sync.WaitGroup // cache writes running in the background (putLater)

	mu        sync.Mutex
	byBuildID map[string]*Module
	byInode   map[devIno]*Module
	mismatch  map[ModuleRef]*Module

	deferredN atomic.Int32 // modules whose debug file fetch was deferred (fetch.go)
	retired   []*Module    // such modules, dropped from the cache, closed by Close

	perfMu   sync.Mutex
	perfMaps map[string]*perfMapEntry
	carried  map[int]*PerfMap // perf maps from saved captures, by pid
}

// New returns a Symbolizer.
func New(opts Options) *Symbolizer {
	return &Symbolizer{
		opts:      opts,
		budget:    safeelf.NewBudget(opts.MaxDebugBytes, opts.MaxSectionBytes),
		byBuildID: make(map[string]*Module),
		byInode:   make(map[devIno]*Module),
		mismatch:  make(map[ModuleRef]*Module),
		perfMaps:  make(map[string]*perfMapEntry),
	}
}

// Flush writes to the cache (Options.Cache) what this Symbolizer decoded
// and has not written yet, so that the next run decodes nothing again. A
// command calls it once its output is written; Close calls it too.
func (s *Symbolizer) Flush() {
	s.packMu.Lock()
	packs := s.packs
	s.packMu.Unlock()
	for _, x := range packs {
		x.writePack()
	}
	s.writes.Wait()
}

// putLater encodes (encode reads only what no longer changes) and writes
// a cache entry in the background: the lookup that built it goes on (a
// cold dump's symbol table and unit index, 0.3-0.7 ms each to write on a
// loaded machine). Flush waits for it.
func (s *Symbolizer) putLater(k diskcache.Key, encode func() []byte) {
	s.writes.Add(1)
	go func() {
		defer s.writes.Done()
		_ = contain.Call("cache write", func() { s.opts.Cache.Put(k, encode()) })
	}()
}

// registerPack notes a module whose decoded units Flush writes.
func (s *Symbolizer) registerPack(x *dwarfIndex) {
	s.packMu.Lock()
	s.packs = append(s.packs, x)
	s.packMu.Unlock()
}

// Close releases every file the Symbolizer holds open, after a Flush.
// Modules must not be used afterwards.
func (s *Symbolizer) Close() error {
	s.Flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[*Module]bool)
	var first error
	closeAll := func(m *Module) {
		if seen[m] {
			return
		}
		seen[m] = true
		if err := m.close(); err != nil && first == nil {
			first = err
		}
	}
	for _, m := range s.byBuildID {
		closeAll(m)
	}
	for _, m := range s.byInode {
		closeAll(m)
	}
	for _, m := range s.mismatch {
		closeAll(m)
	}
	for _, m := range s.retired {
		closeAll(m)
	}
	s.retired = nil
	s.byBuildID = make(map[string]*Module)
	s.byInode = make(map[devIno]*Module)
	s.mismatch = make(map[ModuleRef]*Module)
	return first
}

// Module opens (or returns the cached) module for ref.
//
// Files are tried in this order: ref.MapFiles (the exact inode mapped),
// ref.Root+ref.Path, ref.Path. A file other than MapFiles is used only when
// its device+inode or its build id matches ref (or ref carries neither).
// When the file found carries another build id than ref.BuildID the module
// returned has Mismatch() == true and resolves nothing. Without a build id
// in ref a module cached for the same device+inode is returned unchecked:
// pass the build id read from memory whenever there is one.
func (s *Symbolizer) Module(ref ModuleRef) (*Module, error) {
	ref.BuildID = strings.ToLower(ref.BuildID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropDeferred()
	if ref.BuildID != "" {
		if m := s.byBuildID[ref.BuildID]; m != nil {
			return m, nil
		}
	}
	if m := s.mismatch[ref]; m != nil {
		return m, nil
	}
	if ref.Dev != 0 && ref.Inode != 0 && ref.BuildID == "" {
		if m := s.byInode[devIno{ref.Dev, ref.Inode}]; m != nil {
			return m, nil
		}
	}
	if err := s.expired(); err != nil {
		return nil, err // out of time: no new file is opened
	}
	f, err := s.openModuleFile(ref)
	f, err = s.standIn(ref, f, err)
	if err != nil {
		return nil, err
	}
	if f.mismatch {
		m := &Module{path: ref.Path, buildID: f.buildID, mismatch: true, sym: s}
		f.close()
		s.mismatch[ref] = m
		return m, nil
	}
	key := devIno{f.dev, f.ino}
	if m := s.byInode[key]; m != nil && (ref.BuildID == "" || m.buildID == ref.BuildID) {
		f.close()
		return m, nil
	}
	if f.buildID != "" {
		if m := s.byBuildID[f.buildID]; m != nil {
			f.close()
			return m, nil
		}
	}
	m, err := newModule(s, ref.Path, f)
	if err != nil {
		f.close()
		return nil, err
	}
	m.root = ref.searchRoot()
	if m.buildID != "" {
		s.byBuildID[m.buildID] = m
	}
	if key.ino != 0 {
		s.byInode[key] = m
	}
	return m, nil
}

// ModuleFromImage parses an ELF image held in memory (the vdso). The image
// is not copied: the caller must not modify it.
func (s *Symbolizer) ModuleFromImage(image []byte, name string) (*Module, error) {
	f, err := s.parseFile(bytesReaderAt(image), int64(len(image)), name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropDeferred()
	if f.buildID != "" {
		if m := s.byBuildID[f.buildID]; m != nil {
			return m, nil
		}
	}
	m, err := newModule(s, name, f)
	if err != nil {
		return nil, err
	}
	m.image = true
	if m.buildID != "" {
		s.byBuildID[m.buildID] = m
	}
	return m, nil
}

// Module is one loaded ELF object. Its methods are safe for concurrent use.
type Module struct {
	sym      *Symbolizer
	path     string
	root     string // where its debug files are also looked for (ModuleRef.searchRoot)
	buildID  string
	mismatch bool
	image    bool        // from memory (vdso): debug files by build id only
	deferred atomic.Bool // its debug file fetch was deferred: opened again (fetch.go)

	file  *openFile
	loads []loadSeg

	loadOnce sync.Once
	isLoaded atomic.Bool
	src      *sources // symbol sources, loaded on first use

	results resultCache
	data    dataSyms // globals and statics (DataSymbol), loaded on first use
	ahead   lookAhead
	firstPC atomic.Pointer[[]uint64] // the addresses of the first Prefetch, for the load
}

// firstPCs returns the addresses the first Prefetch was given (nil none).
func (m *Module) firstPCs() []uint64 {
	if p := m.firstPC.Load(); p != nil {
		return *p
	}
	return nil
}

// lookAhead is the addresses Prefetch was given, resolved ahead of the
// caller's Lookups by one goroutine (see Prefetch).
type lookAhead struct {
	mu      sync.Mutex
	pcs     []uint64
	running bool
}

// maxLookAhead bounds the addresses kept for lookAhead (the oldest, the
// caller's next, are dropped first).
const maxLookAhead = 1 << 14

// Path is the module's path as the target sees it.
func (m *Module) Path() string { return m.path }

// BuildID is the hex GNU build id of the module's file ("" if none).
func (m *Module) BuildID() string { return m.buildID }

// Mismatch reports that the file found does not match the build id seen in
// the target's memory: its symbols must not be used.
func (m *Module) Mismatch() bool { return m.mismatch }

// FileOffsetToVaddr maps a file offset to the ELF virtual address, through
// the PT_LOAD segment that contains it. A mismatched module maps nothing.
func (m *Module) FileOffsetToVaddr(off uint64) (uint64, bool) {
	if m.mismatch {
		return 0, false
	}
	return offsetToVaddr(m.loads, off)
}

// MappingBias returns the load bias of a mapping [start, end) of the
// module's file at file offset offset (as /proc/PID/maps gives them): an
// address pc in it is the ELF virtual address pc - bias. Unlike
// FileOffsetToVaddr(offset), it picks the PT_LOAD the loader mapped there
// even when the mapping's first page also holds the end of the previous
// segment.
func (m *Module) MappingBias(start, end, offset uint64) (uint64, bool) {
	if m.mismatch {
		return 0, false
	}
	return mappingBias(m.loads, start, end, offset)
}

// ELF returns the module's binary (for its .eh_frame and code), or nil
// (mismatch, or only a separate debug file stands in for it). Its parsed
// headers come along (safeelf.Parsed): the CFI loader need not parse them
// again.
func (m *Module) ELF() io.ReaderAt {
	if m.mismatch || m.file == nil || !hasCode(m.file) {
		return nil
	}
	return m.file.reader()
}

// reader is f's bytes, with its parse when it has one.
func (f *openFile) reader() io.ReaderAt {
	if f.sf != nil {
		return f.sf
	}
	return f.r
}

// DebugELF returns the separate debug file, or nil.
func (m *Module) DebugELF() io.ReaderAt {
	if m.mismatch {
		return nil
	}
	src := m.sources()
	if src.debug == nil {
		return nil
	}
	return src.debug.reader()
}

// DebugFile returns the path of the separate debug file found, or "".
func (m *Module) DebugFile() string {
	if m.mismatch {
		return ""
	}
	src := m.sources()
	if src.debug == nil {
		return ""
	}
	return src.debug.name
}

// SymbolSources lists the symbol sources found, best first (for
// diagnostics), e.g. ["dwarf", "symtab", "dynsym"].
func (m *Module) SymbolSources() []string {
	if m.mismatch {
		return nil
	}
	return append([]string(nil), m.sources().names...)
}

// Lookup resolves an ELF virtual address of this module, appending logical
// frames (innermost first) to out. Nothing is appended when the address is
// unknown or the module is a mismatch.
func (m *Module) Lookup(vaddr uint64, out []Sym) []Sym {
	if m.mismatch {
		return out
	}
	if r, ok := m.results.get(vaddr); ok {
		return append(out, r...)
	}
	if m.sym.expired() != nil && !m.loaded() {
		return out // out of time: not loaded now, and not cached as unknown
	}
	n := len(out)
	var src *sources
	err := safely("module "+m.path, func() error {
		src = m.sources()
		out = src.lookup(vaddr, out, !m.sym.opts.NoDemangle)
		return nil
	})
	if err != nil {
		// A parser bug costs this module its names, nothing else.
		m.poison(err)
		return out[:n]
	}
	if src.partial && m.sym.expired() != nil {
		return out // decoded only in part for lack of time: not cached
	}
	m.results.put(vaddr, out[n:])
	return out
}

// Prefetch starts decoding, on the cores the caller leaves idle, the DWARF
// units that hold vaddrs and are not decoded yet, so that the Lookups
// that follow (on the caller's goroutine, in order) wait at most for the
// unit they need. It returns at once and changes no answer. A batch
// caller (symbolize reading a file of addresses) passes what it has read
// ahead; with one core, or out of time, it does nothing.
func (m *Module) Prefetch(vaddrs []uint64) {
	if m.mismatch || len(vaddrs) == 0 || runtime.GOMAXPROCS(0) < 2 || m.sym.expired() != nil {
		return
	}
	if !m.loaded() && m.firstPC.Load() == nil {
		// The load decodes their units as its .debug_info comes out.
		pcs := slices.Clone(vaddrs[:min(len(vaddrs), maxLookAhead)])
		m.firstPC.CompareAndSwap(nil, &pcs)
	}
	var src *sources
	if err := safely("module "+m.path, func() error {
		src = m.sources()
		return nil
	}); err != nil || src == nil || src.dw == nil || src.broken.Load() {
		return
	}
	src.dw.prefetch(vaddrs, runtime.GOMAXPROCS(0)-1)
	m.lookAhead(vaddrs)
}

// lookAhead resolves vaddrs into the result cache on a goroutine of its
// own, from the last: the caller's Lookups, from the first, then find
// them there. Once the units are decoded, a batch's lookups (the walk
// down its inlines, the demangling) were the caller's alone, one core
// idle: libcephfs's 10,000 addresses spent 110 ms so after the last unit.
// The two meet in the middle; what the caller already resolved is skipped.
func (m *Module) lookAhead(vaddrs []uint64) {
	a := &m.ahead
	a.mu.Lock()
	a.pcs = append(a.pcs, vaddrs...)
	if n := len(a.pcs); n > maxLookAhead {
		a.pcs = append(a.pcs[:0], a.pcs[n-maxLookAhead:]...)
	}
	start := !a.running
	a.running = true
	a.mu.Unlock()
	if start {
		go m.lookAheadWorker()
	}
}

func (m *Module) lookAheadWorker() {
	a := &m.ahead
	var out []Sym
	for {
		a.mu.Lock()
		n := len(a.pcs)
		if n == 0 || m.sym.expired() != nil {
			a.pcs, a.running = nil, false
			a.mu.Unlock()
			return
		}
		pc := a.pcs[n-1]
		a.pcs = a.pcs[:n-1]
		a.mu.Unlock()
		if _, ok := m.results.get(pc); !ok {
			out = m.Lookup(pc, out[:0])
		}
	}
}

// Expired reports whether the Context ended before every lookup asked of
// the Symbolizer could be resolved: some addresses were left unnamed for
// lack of time, and the output should say so.
func (s *Symbolizer) Expired() bool { return s.expiredFlag.Load() }

// BudgetExceeded reports whether some file was given up because it needed
// more than the debug-data budget (Options.MaxDebugBytes).
func (s *Symbolizer) BudgetExceeded() bool { return s.limitFlag.Load() }

// BudgetUsed is the number of bytes charged to the debug-data budget.
func (s *Symbolizer) BudgetUsed() int64 { return s.budget.Used() }

// expired returns the Context's error once it is done, and remembers that
// work was cut short.
func (s *Symbolizer) expired() error {
	ctx := s.opts.Context
	if ctx == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		s.expiredFlag.Store(true)
		return err
	}
	return nil
}

// noteLimit records why a read failed when it was a budget or deadline.
func (s *Symbolizer) noteLimit(err error) {
	switch {
	case errors.Is(err, safeelf.ErrBudget), errors.Is(err, safeelf.ErrTooLarge):
		s.limitFlag.Store(true)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		s.expiredFlag.Store(true)
	}
}

func (m *Module) close() error {
	if m.file != nil {
		m.file.close()
	}
	if m.src != nil && m.src.debug != nil {
		m.src.debug.close()
	}
	if m.src != nil && m.src.alt != nil {
		m.src.alt.close()
	}
	return nil
}

// resultCache remembers recent lookups, so that a sampler's hot PCs cost a
// map access. It is bounded: when full it starts over.
type resultCache struct {
	mu sync.RWMutex
	m  map[uint64][]Sym
}

const resultCacheMax = 1 << 16

func (c *resultCache) get(pc uint64) ([]Sym, bool) {
	c.mu.RLock()
	r, ok := c.m[pc]
	c.mu.RUnlock()
	return r, ok
}

func (c *resultCache) put(pc uint64, r []Sym) {
	cp := append([]Sym(nil), r...)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= resultCacheMax {
		c.m = make(map[uint64][]Sym)
	}
	c.m[pc] = cp
	c.mu.Unlock()
}

// lookupUncached is Lookup without the result cache (benchmarks).
func (m *Module) lookupUncached(vaddr uint64, out []Sym) []Sym {
	if m.mismatch {
		return out
	}
	n := len(out)
	if err := safely("module "+m.path, func() error {
		out = m.sources().lookup(vaddr, out, !m.sym.opts.NoDemangle)
		return nil
	}); err != nil {
		m.poison(err)
		return out[:n]
	}
	return out
}

// Budget is the debug-data budget the Symbolizer reads files within, for
// other readers of the same files (the unwinder's CFI) to share.
func (s *Symbolizer) Budget() *safeelf.Budget { return s.budget }

// Context is Options.Context (nil: no bound).
func (s *Symbolizer) Context() context.Context { return s.opts.Context }
