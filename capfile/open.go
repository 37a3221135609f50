package capfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// OpenFile opens the saved capture at path (a capture file or a core) to
// be read by Load, in-process or in a sandboxed child: a regular file,
// opened without blocking (a FIFO put in its place does not hang the
// reader). The error says which file and why, in the command line's words.
func OpenFile(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read %s (%v)", path, errors.Unwrap(err))
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("cannot read %s (not a regular file; give a capture file or a core)", path)
	}
	return f, st.Size(), nil
}

// LoadError is Load's error err for the file at path (or a sandboxed
// child's, which unwraps to ErrNotCapture alike) in the command line's
// words.
func LoadError(path string, err error) error {
	if errors.Is(err, ErrNotCapture) {
		return fmt.Errorf("cannot read %s (%v; make one with 'stackshot capture PID -o FILE')", path, err)
	}
	return fmt.Errorf("cannot read %s (%v)", path, err)
}
