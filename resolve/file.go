package resolve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"stackshot/report"
	"stackshot/symtab"
)

// ErrNotELF means a file given to FileSymbolizer is not an ELF file.
var ErrNotELF = errors.New("not an ELF file")

// FileSymbolizer names addresses of one ELF file (its virtual addresses),
// as addr2line does: each address's logical frames, innermost (inlined)
// first. Its errors are in the contract's words (one that is not ELF wraps
// ErrNotELF); a relative path is taken from the working directory.
func FileSymbolizer(sym *symtab.Symbolizer, path string) (func(addr uint64) []report.Frame, error) {
	lookup, _, err := FileSymbolizerAhead(sym, path)
	return lookup, err
}

// FileSymbolizerAhead is FileSymbolizer with a prefetch function too: given
// addresses the caller will look up next, it starts decoding their debug
// information on the idle cores (symtab.Module.Prefetch).
func FileSymbolizerAhead(sym *symtab.Symbolizer, path string) (func(addr uint64) []report.Frame, func([]uint64), error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // a relative path, as addr2line takes it
	}
	// The operator's own path: followed through symlinks (libfoo.so.2 ->
	// libfoo.so.2.0.0), as addr2line does; the files a target names are
	// opened without following (symtab's Opener).
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	mod, err := fileModule(sym, path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil, fmt.Errorf("cannot read %s (no such file; check the path)", path)
	case errors.Is(err, ErrNotELF):
		return nil, nil, fmt.Errorf("cannot read %s (%w; give an executable or a shared library)", path, err)
	case err != nil:
		return nil, nil, fmt.Errorf("cannot read %s (%v; check it is a readable executable or shared library)", path, err)
	}
	var syms []symtab.Sym
	return func(addr uint64) []report.Frame {
		syms = mod.Lookup(addr, syms[:0])
		var out []report.Frame
		for _, s := range syms {
			out = append(out, report.Frame{Function: s.Function, File: s.File, Line: s.Line, Inlined: s.Inlined})
		}
		return out
	}, mod.Prefetch, nil
}

func fileModule(sym *symtab.Symbolizer, path string) (*symtab.Module, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	f.Close()
	if err != nil || !bytes.Equal(magic, []byte("\x7fELF")) {
		return nil, ErrNotELF
	}
	return sym.Module(symtab.ModuleRef{Path: path})
}
