//go:build !linux

package symtab

import (
	"fmt"
	"os"
	"syscall"
)

// openELF opens a host path as a regular file and parses its ELF headers.
// Off Linux there is no target root: saved captures are read against the
// analysing host's files.
func (s *Symbolizer) openELF(root, p string, follow bool) (*openFile, error) {
	if root != "" && root != "/" {
		return nil, fmt.Errorf("open %s: target roots need Linux", p)
	}
	fh, err := s.opener().Open(root, p, follow)
	if err != nil {
		return nil, err
	}
	return s.wrapELF(fh, root, p)
}

// wrapELF parses fh, opened as root and p, as an ELF file (fh is closed
// on an error).
func (s *Symbolizer) wrapELF(fh *os.File, root, p string) (*openFile, error) {
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	f, err := s.parseFile(fh, st.Size(), p)
	if err != nil {
		fh.Close()
		return nil, err
	}
	f.closer = fh
	return f, nil
}

func openPlain(p string) (*os.File, error) {
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil || !st.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("open %s: not a regular file", p)
	}
	return fh, nil
}

// fileOwner returns the owner of an opened file.
func fileOwner(f *os.File) (uint32, bool) {
	st, err := f.Stat()
	if err != nil {
		return 0, false
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Uid, true
	}
	return 0, false
}

// openPerfMap opens a perf map the operator named (no target roots here).
func openPerfMap(root, p string) (*os.File, error) {
	if root != "" {
		return nil, fmt.Errorf("open %s: target roots need Linux", p)
	}
	return openPlain(p)
}

// Open implements Opener: host paths only.
func (SystemOpener) Open(root, p string, follow bool) (*os.File, error) {
	if root != "" && root != "/" {
		return nil, fmt.Errorf("open %s: target roots need Linux", p)
	}
	return openPlain(p)
}

// OpenPerfMap implements Opener: live targets need Linux.
func (SystemOpener) OpenPerfMap(pid int, root string) (*os.File, error) {
	return nil, fmt.Errorf("perf map of process %d: live targets need Linux", pid)
}
