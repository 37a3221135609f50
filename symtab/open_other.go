//go:build !linux

package symtab

import (
	"fmt"
	"os"
)

// openELF opens path as a regular file and parses its ELF headers.
func openELF(path string) (*openFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil || !st.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("open %s: not a regular file", path)
	}
	f, err := parseFile(fh, st.Size(), path)
	if err != nil {
		fh.Close()
		return nil, err
	}
	f.closer = fh
	return f, nil
}

func openPlain(path string) (*os.File, error) { return os.Open(path) }
