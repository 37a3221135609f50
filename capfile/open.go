package capfile

import (
	"errors"
	"fmt"
	"os"
)

// Open loads the capture file or ELF core at path (Load), its errors in
// the command line's words. The file stays open (a core's memory is read
// from it on demand) until the process exits.
func Open(path string) ([]Saved, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s (%v)", path, errors.Unwrap(err))
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("cannot read %s (not a regular file; give a capture file or a core)", path)
	}
	saved, err := Load(f, st.Size())
	if err != nil {
		f.Close()
		if errors.Is(err, ErrNotCapture) {
			return nil, fmt.Errorf("cannot read %s (%v; make one with 'stackshot capture PID -o FILE')", path, err)
		}
		return nil, fmt.Errorf("cannot read %s (%v)", path, err)
	}
	return saved, nil
}
