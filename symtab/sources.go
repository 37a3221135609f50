package symtab

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"stackshot/internal/bin"
	"stackshot/internal/contain"
	"stackshot/internal/safeelf"

	"github.com/ulikunitz/xz"
)

// sources holds a module's symbol sources, loaded on first use.
type sources struct {
	names  []string    // what was found, best first
	debug  *openFile   // separate debug file
	alt    *openFile   // dwz file of the DWARF used
	dw     *dwarfIndex // DWARF of the debug file or the binary
	goOnce sync.Once
	goFile *openFile
	gotab  *goTable  // Go pclntab, loaded on first use (see goTable)
	syms   *symTable // .symtab + .gnu_debugdata + .dynsym, merged
	errs   []error   // problems met while loading (diagnostics)

	// partial: loading stopped at the Context's end, some sources are
	// missing; broken: a panic while loading or looking up (a parser bug
	// met on hostile input): the module resolves nothing more.
	partial bool
	broken  atomic.Bool
	errMu   sync.Mutex // for errs once loaded (poison)
}

func (m *Module) sources() *sources {
	m.loadOnce.Do(func() {
		var src *sources
		if err := safely("module "+m.path, func() error {
			src = m.loadSources()
			return nil
		}); err != nil {
			src = &sources{syms: buildSymTable(nil), errs: []error{err}}
			src.broken.Store(true)
		}
		m.src = src
		m.isLoaded.Store(true)
	})
	return m.src
}

// loaded reports whether the module's sources were loaded.
func (m *Module) loaded() bool { return m.isLoaded.Load() }

// poison makes the module resolve nothing more after a panic in it.
func (m *Module) poison(err error) {
	if src := m.sources(); src != nil {
		src.broken.Store(true)
		src.errMu.Lock()
		src.errs = append(src.errs, err)
		src.errMu.Unlock()
	}
}

// loadHook, when set (by tests only), runs as a module's sources start to
// load: it stands for a parser bug met on that module's hostile input.
var loadHook func(path string)

// loadDWARFInto loads the DWARF of the debug file, else of the binary,
// into src (not at all for a names-only symbolizer: decompressing and
// indexing a large debug file costs far more than its symbol table).
func (m *Module) loadDWARFInto(src *sources) {
	for _, f := range []*openFile{src.debug, m.file} {
		if f == nil || m.sym.opts.NamesOnly {
			continue
		}
		var alt *altDWARF
		af := m.findAltFile(f)
		if af != nil {
			if alt = loadAlt(af); alt == nil {
				af.close()
				af = nil
			}
		}
		dw, err := loadDWARF(f, alt, m.firstPCs())
		if err == nil {
			src.dw, src.alt = dw, af
			src.names = append(src.names, "dwarf")
			return
		}
		if af != nil {
			af.close()
		}
		if !errors.Is(err, ErrNoSymbols) {
			src.errs = append(src.errs, err)
		}
	}
}

func (m *Module) loadSources() *sources {
	if loadHook != nil {
		loadHook(m.path)
	}
	src := &sources{}
	defer func() {
		if m.sym.expired() != nil {
			src.partial = true
		}
	}()
	if m.sym.expired() != nil {
		src.syms = buildSymTable(nil)
		return src
	}
	src.debug = m.findDebugFile()
	// The merged symbol table: from the cache when this binary and its
	// debug file were seen before, else read from every table and kept.
	// Reading the tables is independent of the DWARF: it runs beside the
	// DWARF's decompression (the other core's otherwise idle time on a
	// cold run), into its own sources merged after.
	key, cached := symbolsEntryKey(m.file, src.debug)
	var cachedSyms *symTable // (nil, on a hit too, for an empty table)
	var cachedNames []string
	hit := false
	if cached {
		if b, ok := m.sym.cacheGet(key); ok {
			if t, names, err := decodeSymbols(b); err == nil {
				cachedSyms, cachedNames, hit = t, names, true
			}
		}
	}
	symSrc := &sources{debug: src.debug}
	var symErr error // a panic while collecting, raised again below
	var symDone chan struct{}
	if !hit {
		symDone = make(chan struct{})
		go func() {
			defer close(symDone)
			symErr = contain.Call("symbols", func() { symSrc.syms = m.collectSymbols(symSrc) })
		}()
	}
	waitSyms := func() {
		if symDone != nil {
			<-symDone
			symDone = nil
			if symErr != nil {
				panic(symErr)
			}
		}
	}
	defer waitSyms() // never return with the goroutine still reading
	m.loadDWARFInto(src)
	src.goFile = m.file
	if m.sym.expired() != nil {
		waitSyms()
		src.syms = buildSymTable(nil)
		return src
	}
	if src.dw == nil {
		// With DWARF the pclntab is only a fallback: loaded on first need.
		if src.goTable() != nil {
			src.names = append(src.names, "gopclntab")
		}
	}
	if hit {
		src.syms = cachedSyms
		src.names = append(src.names, cachedNames...)
	} else {
		waitSyms()
		src.syms = symSrc.syms
		src.names = append(src.names, symSrc.names...)
		src.errs = append(src.errs, symSrc.errs...)
		if cached && len(symSrc.errs) == 0 && m.sym.expired() == nil {
			syms, names := src.syms, symSrc.names
			m.sym.putLater(key, func() []byte { return encodeSymbols(syms, names) })
		}
	}
	if src.dw != nil {
		src.dw.syms = src.syms
	}
	return src
}

// collectSymbols reads every symbol table of the module (its debug file's
// .symtab, its own .symtab, .gnu_debugdata, .dynsym) into one table,
// noting the sources found and the errors met in src.
func (m *Module) collectSymbols(src *sources) *symTable {
	ef := m.file.ef
	var raw []rawSym
	var err error
	if src.debug != nil && hasSymtab(src.debug.ef) {
		raw, err = collectSyms(src.debug, false, rankDebugSymtab, raw)
		if err == nil {
			src.names = append(src.names, "debug-symtab")
		} else {
			src.errs = append(src.errs, err)
		}
	}
	if hasSymtab(ef) {
		raw, err = collectSyms(m.file, false, rankSymtab, raw)
		if err == nil {
			src.names = append(src.names, "symtab")
		} else {
			src.errs = append(src.errs, err)
		}
	}
	if mini, err := miniDebugInfo(m.file); err == nil && mini != nil {
		n := len(raw)
		// (The decompressed image stays charged: its symbols are kept.)
		raw, err = collectSyms(mini, false, rankMiniDebug, raw)
		if err == nil && len(raw) > n {
			src.names = append(src.names, "gnu_debugdata")
		}
	} else if err != nil {
		src.errs = append(src.errs, err)
	}
	n := len(raw)
	raw, err = collectSyms(m.file, true, rankDynsym, raw)
	if err == nil && len(raw) > n {
		src.names = append(src.names, "dynsym")
	}
	return buildSymTable(raw)
}

// goTable returns the Go pclntab of the binary, loading it on first use.
func (s *sources) goTable() *goTable {
	s.goOnce.Do(func() {
		if g, err := loadGoTable(s.goFile); err == nil {
			s.gotab = g
		}
	})
	return s.gotab
}

func hasSymtab(ef *elf.File) bool {
	for _, s := range ef.Sections {
		if s.Type == elf.SHT_SYMTAB {
			return true
		}
	}
	return false
}

// maxXZDict bounds the LZMA2 dictionary an xz stream may ask for (the xz
// reader allocates it up front; xz -9 uses 64 MiB).
const maxXZDict = 64 << 20

// miniDebugInfo decompresses .gnu_debugdata (an xz-compressed ELF holding
// the symbols left out of .dynsym), or returns nil.
func miniDebugInfo(f *openFile) (*openFile, error) {
	sec := f.ef.Section(".gnu_debugdata")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	comp, err := f.data(sec)
	if err != nil {
		return nil, err
	}
	defer f.sym.budget.Give(int64(len(comp)))
	// The xz reader allocates each block's dictionary as it meets it: all
	// are checked first, and the declared size against the cap.
	if d, total, ok := xzLimits(comp); !ok || d > maxXZDict || total > uint64(f.sym.budget.SectionCap()) {
		return nil, &FormatError{Section: ".gnu_debugdata", Msg: fmt.Sprintf("xz stream malformed or too large (dictionary %d, size %d)", d, total)}
	}
	if err := f.sym.budget.Take(maxXZDict); err != nil {
		return nil, fmt.Errorf("decompress .gnu_debugdata: %w", err)
	}
	defer f.sym.budget.Give(maxXZDict)
	var data []byte
	err = safely("gnu_debugdata", func() error {
		zr, err := xz.NewReader(bytes.NewReader(comp))
		if err != nil {
			return err
		}
		data, err = safeelf.ReadStream(f.sym.opts.Context, ".gnu_debugdata", zr, f.sym.budget)
		return err
	})
	if err != nil {
		f.sym.noteLimit(err)
		return nil, fmt.Errorf("decompress .gnu_debugdata: %w", err)
	}
	return f.sym.parseFile(bytes.NewReader(data), int64(len(data)), f.name+"[.gnu_debugdata]")
}

// xzLimits reads what an xz stream will ask of its decoder before it
// runs: the largest LZMA2 dictionary of any block (the decoder allocates
// it up front) and the total uncompressed size, from the stream's index
// (found through the footer) and each block's header. ok is false for
// anything but one well-formed stream.
func xzLimits(b []byte) (dict, total uint64, ok bool) {
	for len(b) >= 4 && string(b[len(b)-4:]) == "\x00\x00\x00\x00" {
		b = b[:len(b)-4] // stream padding
	}
	if len(b) < 24 || string(b[:6]) != "\xfd7zXZ\x00" || string(b[len(b)-2:]) != "YZ" {
		return 0, 0, false
	}
	foot := b[len(b)-12:]
	backward := (uint64(binary.LittleEndian.Uint32(foot[4:8])) + 1) * 4
	if backward > uint64(len(b)-24) {
		return 0, 0, false
	}
	idxStart := uint64(len(b)-12) - backward
	r := bin.NewReader(b[idxStart:len(b)-12], nil)
	if r.U8() != 0 {
		return 0, 0, false
	}
	n := r.ULEB()
	if n > uint64(r.Left()) {
		return 0, 0, false
	}
	off := uint64(12)
	for k := uint64(0); k < n && r.Err() == nil; k++ {
		unpadded, size := r.ULEB(), r.ULEB()
		if off >= idxStart || unpadded > idxStart-off {
			return 0, 0, false
		}
		d, ok := xzBlockDict(b[off:idxStart])
		if !ok {
			return 0, 0, false
		}
		dict = max(dict, d)
		if total+size < total {
			return 0, 0, false
		}
		total += size
		off += align4(unpadded)
	}
	if r.Err() != nil || off != idxStart {
		return 0, 0, false
	}
	return dict, total, true
}

// xzBlockDict returns the LZMA2 dictionary size a block header asks for:
// size byte, flags, optional sizes, then filter flags (id, properties);
// LZMA2 (id 0x21) has one property byte.
func xzBlockDict(b []byte) (uint64, bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, false
	}
	hs := (int(b[0]) + 1) * 4
	if len(b) < hs {
		return 0, false
	}
	r := bin.NewReader(b[:hs], nil)
	r.U8()
	flags := r.U8()
	if flags&0x40 != 0 {
		r.ULEB()
	}
	if flags&0x80 != 0 {
		r.ULEB()
	}
	for i := 0; i < int(flags&3)+1 && r.Err() == nil; i++ {
		id := r.ULEB()
		props := r.Bytes(r.ULEB())
		if id == 0x21 {
			if len(props) != 1 || props[0] > 40 {
				return 0, false
			}
			p := uint64(props[0])
			if p == 40 {
				return 1<<32 - 1, true
			}
			return (2 | p&1) << (p/2 + 11), true
		}
	}
	return 0, false
}

// lookup resolves pc through the best source that knows it.
func (s *sources) lookup(pc uint64, out []Sym, demangle bool) []Sym {
	if s.broken.Load() {
		return out
	}
	var lineOnly *Sym
	if s.dw != nil {
		n := len(out)
		var res dwarfResult
		out, res = s.dw.lookup(pc, out, demangle)
		switch res {
		case dwarfFull:
			return out
		case dwarfLineOnly:
			l := out[n]
			lineOnly = &l
			out = out[:n]
		}
	}
	if g := s.goTable(); g != nil {
		n := len(out)
		if out, ok := g.lookupSyms(pc, out); ok {
			if lineOnly != nil && len(out) == n+1 {
				out[n].File, out[n].Line = lineOnly.File, lineOnly.Line
			}
			return out
		}
	}
	if i, ok := s.syms.lookup(pc); ok {
		sym := Sym{Function: s.syms.nameAt(i, demangle), Offset: pc - s.syms.addr[i]}
		if lineOnly != nil {
			sym.File, sym.Line = lineOnly.File, lineOnly.Line
		}
		return append(out, sym)
	}
	if lineOnly != nil {
		return append(out, *lineOnly)
	}
	return out
}
