package resolve

import (
	"bytes"
	"errors"
	"io"
	"os"

	"stackshot/report"
	"stackshot/symtab"
)

// ErrNotELF means a file given to FileSymbolizer is not an ELF file.
var ErrNotELF = errors.New("not an ELF file")

// FileSymbolizer names addresses of one ELF file (its virtual addresses),
// as addr2line does: each address's logical frames, innermost (inlined)
// first. A file that cannot be opened gives the os error; one that is not
// ELF, ErrNotELF.
func FileSymbolizer(sym *symtab.Symbolizer, path string) (func(addr uint64) []report.Frame, error) {
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
	mod, err := sym.Module(symtab.ModuleRef{Path: path})
	if err != nil {
		return nil, err
	}
	var syms []symtab.Sym
	return func(addr uint64) []report.Frame {
		syms = mod.Lookup(addr, syms[:0])
		var out []report.Frame
		for _, s := range syms {
			out = append(out, report.Frame{Function: s.Function, File: s.File, Line: s.Line, Inlined: s.Inlined})
		}
		return out
	}, nil
}
