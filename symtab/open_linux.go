//go:build linux

package symtab

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openRegular opens path read-only and non-blocking, and keeps it only
// when it is a regular file.
func openRegular(path string) (*os.File, *unix.Stat_t, error) {
	var st unix.Stat_t
	// Refuse FIFOs and devices before opening them at all (an open can
	// have side effects); the fstat below re-checks what was opened.
	if err := unix.Stat(path, &st); err != nil {
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, fmt.Errorf("open %s: not a regular file", path)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("open %s: not a regular file", path)
	}
	return os.NewFile(uintptr(fd), path), &st, nil
}

// openELF opens path as a regular file and parses its ELF headers.
func openELF(path string) (*openFile, error) {
	fh, st, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	f, err := parseFile(fh, st.Size, path)
	if err != nil {
		fh.Close()
		return nil, err
	}
	f.closer = fh
	f.dev = uint64(st.Dev)
	f.ino = st.Ino
	return f, nil
}

// openPlain opens a regular file read-only and non-blocking.
func openPlain(path string) (*os.File, error) {
	f, _, err := openRegular(path)
	return f, err
}
