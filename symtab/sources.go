package symtab

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"sync"

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
}

func (m *Module) sources() *sources {
	m.loadOnce.Do(func() { m.src = m.loadSources() })
	return m.src
}

func (m *Module) loadSources() *sources {
	src := &sources{}
	ef := m.file.ef
	var raw []rawSym
	var err error
	src.debug = m.findDebugFile()
	// DWARF: the debug file's, else the binary's (not at all for a
	// names-only symbolizer: decompressing and indexing a large debug file
	// costs far more than its symbol table).
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
		dw, err := loadDWARF(f, alt)
		if err == nil {
			src.dw, src.alt = dw, af
			src.names = append(src.names, "dwarf")
			break
		}
		if af != nil {
			af.close()
		}
		if !errors.Is(err, ErrNoSymbols) {
			src.errs = append(src.errs, err)
		}
	}
	src.goFile = m.file
	if src.dw == nil {
		// With DWARF the pclntab is only a fallback: loaded on first need.
		if src.goTable() != nil {
			src.names = append(src.names, "gopclntab")
		}
	}
	if src.debug != nil && hasSymtab(src.debug.ef) {
		raw, err = collectSyms(src.debug.ef, false, rankDebugSymtab, raw)
		if err == nil {
			src.names = append(src.names, "debug-symtab")
		} else {
			src.errs = append(src.errs, err)
		}
	}
	if hasSymtab(ef) {
		raw, err = collectSyms(ef, false, rankSymtab, raw)
		if err == nil {
			src.names = append(src.names, "symtab")
		} else {
			src.errs = append(src.errs, err)
		}
	}
	if mini, err := miniDebugInfo(m.file); err == nil && mini != nil {
		n := len(raw)
		raw, err = collectSyms(mini, false, rankMiniDebug, raw)
		if err == nil && len(raw) > n {
			src.names = append(src.names, "gnu_debugdata")
		}
	} else if err != nil {
		src.errs = append(src.errs, err)
	}
	n := len(raw)
	raw, err = collectSyms(ef, true, rankDynsym, raw)
	if err == nil && len(raw) > n {
		src.names = append(src.names, "dynsym")
	}
	src.syms = buildSymTable(raw)
	if src.dw != nil {
		src.dw.syms = src.syms
	}
	return src
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

// miniDebugInfo decompresses .gnu_debugdata (an xz-compressed ELF holding
// the symbols left out of .dynsym), or returns nil.
func miniDebugInfo(f *openFile) (*elf.File, error) {
	sec := f.ef.Section(".gnu_debugdata")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	comp, err := sectionData(sec, f.size)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = safely("gnu_debugdata", func() error {
		zr, err := xz.NewReader(bytes.NewReader(comp))
		if err != nil {
			return err
		}
		data, err = io.ReadAll(io.LimitReader(zr, maxMiniDebug+1))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("decompress .gnu_debugdata: %w", err)
	}
	if len(data) > maxMiniDebug {
		return nil, &FormatError{Section: ".gnu_debugdata", Msg: "decompressed size too large"}
	}
	mf, err := parseFile(bytes.NewReader(data), int64(len(data)), f.name+"[.gnu_debugdata]")
	if err != nil {
		return nil, err
	}
	return mf.ef, nil
}

// lookup resolves pc through the best source that knows it.
func (s *sources) lookup(pc uint64, out []Sym, demangle bool) []Sym {
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
