package hotspot

import (
	"debug/elf"
	"errors"
	"io"
	"path"
	"strings"

	"stackshot/internal/contain"
	"stackshot/internal/safeelf"
)

// ErrNotHotSpot says a file exports none of the VM tables.
var ErrNotHotSpot = errors.New("not a HotSpot JVM")

// IsLibJVM says whether a mapped file's path names HotSpot's library.
func IsLibJVM(p string) bool {
	return path.Base(strings.TrimSuffix(p, " (deleted)")) == "libjvm.so"
}

// TableSymbols reads the file virtual addresses of the VM tables' symbols
// from libjvm.so's dynamic symbol table (they are exported for this).
func TableSymbols(lib io.ReaderAt, size int64) (map[string]uint64, error) {
	var f *elf.File
	err := contain.Do("reading libjvm.so's headers", func() error {
		if _, err := safeelf.Check(lib, size); err != nil {
			return err
		}
		var err error
		f, err = elf.NewFile(lib)
		return err
	})
	if err != nil {
		return nil, err
	}
	return TableSymbolsELF(f)
}

// TableSymbolsELF is TableSymbols for a file whose headers were checked
// and parsed already.
func TableSymbolsELF(f *elf.File) (sym map[string]uint64, err error) {
	err = contain.Do("reading libjvm.so's symbols", func() error {
		syms, err := f.DynamicSymbols()
		if err != nil {
			return err
		}
		sym = map[string]uint64{}
		for _, s := range syms {
			if IsTableSymbol(s.Name) && s.Value != 0 {
				sym[s.Name] = s.Value
			}
		}
		return nil
	})
	if err == nil && sym["gHotSpotVMStructs"] == 0 {
		return nil, ErrNotHotSpot
	}
	return sym, err
}
