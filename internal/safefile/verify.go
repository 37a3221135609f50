//go:build linux

package safefile

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Verify runs check on what was written so far, read back from the
// temporary file: a download is checked before Commit puts it in place.
// The file is reopened for reading through its descriptor (the same inode,
// never the path).
func (f *File) Verify(check func(r io.ReaderAt, size int64) error) error {
	if f.ended {
		return fmt.Errorf("verifying %s (already closed)", f.path)
	}
	r, err := os.Open("/proc/self/fd/" + strconv.Itoa(int(f.f.Fd())))
	if err != nil {
		return fmt.Errorf("verifying %s (%w)", f.path, unwrap(err))
	}
	defer r.Close()
	var a, b unix.Stat_t
	if unix.Fstat(int(f.f.Fd()), &a) != nil || unix.Fstat(int(r.Fd()), &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		return fmt.Errorf("verifying %s (the file read back is not the one written)", f.path)
	}
	return check(r, b.Size)
}
