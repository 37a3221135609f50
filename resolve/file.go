package resolve

import (
	"stackshot/report"
	"stackshot/symtab"
)

// FileSymbolizer names addresses of one ELF file (its virtual addresses),
// as addr2line does: each address's logical frames, innermost (inlined)
// first.
func FileSymbolizer(sym *symtab.Symbolizer, path string) (func(addr uint64) []report.Frame, error) {
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
