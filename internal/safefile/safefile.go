//go:build linux

// Package safefile creates the files stackshot writes (reports, profiles,
// captures, cores, spools, caches) so that running as root next to other
// users' files is safe.
//
// A file is written under a fresh random name in the destination's
// directory, created with O_CREAT|O_EXCL|O_NOFOLLOW (so nothing planted
// there, symlink or file, is ever opened), given its mode explicitly with
// fchmod, synced, and renamed over the destination; rename replaces a
// directory entry and never follows a symlink. The destination is refused
// when it exists and is not a regular file owned by stackshot's effective
// user, and the directory is refused when every user may write to it but it
// is not sticky (another user could swap the temporary file before the
// rename). After the rename the destination is checked to be the file that
// was written.
//
// Paths are relative to the caller's working directory; the directory part
// of a destination is opened once, one component at a time (a symlink on
// the way is followed only when root or stackshot's own user owns it), and
// every later step works relative to that descriptor.
package safefile

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Mode is who may read a written file.
type Mode int

const (
	// Public is for reports and profiles: 0644 less the umask.
	Public Mode = iota
	// Private is for captures, cores and anything holding the target's raw
	// memory (keys, passwords): 0600, whatever the umask.
	Private
	// ReadOnly is for files never rewritten in place, such as the
	// debuginfod cache shared with gdb and elfutils: 0400, as they make it.
	ReadOnly
)

// Perm returns the permission bits a file of mode m is given.
func (m Mode) Perm() os.FileMode {
	switch m {
	case Private:
		return 0o600
	case ReadOnly:
		return 0o400
	}
	return 0o644 &^ umask()
}

var (
	umaskOnce sync.Once
	umaskVal  os.FileMode
)

// umask is the process's file mode creation mask, read from
// /proc/self/status (Linux 4.7+) rather than set and reset, which would race
// with files created meanwhile; older kernels fall back to setting it.
func umask() os.FileMode {
	umaskOnce.Do(func() {
		if b, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, line := range bytes.Split(b, []byte("\n")) {
				if v, ok := bytes.CutPrefix(line, []byte("Umask:")); ok {
					if n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32); err == nil {
						umaskVal = os.FileMode(n) & 0o777
						return
					}
				}
			}
		}
		old := unix.Umask(0o022)
		unix.Umask(old)
		umaskVal = os.FileMode(old) & 0o777
	})
	return umaskVal
}

// File is a file being written; it appears at its destination only on
// Commit.
type File struct {
	f      *os.File
	dir    *os.File
	path   string // destination as given
	base   string // destination's name in dir
	tmp    string // temporary name in dir
	mode   Mode
	ended  bool
	nosync bool
}

// Create starts writing path. Nothing appears at path until Commit; Abort
// (or a failed Commit) removes the temporary file.
func Create(path string, m Mode) (*File, error) {
	dir, base, err := openDir(path)
	if err != nil {
		return nil, err
	}
	if err := checkDest(dir, path, base); err != nil {
		dir.Close()
		return nil, err
	}
	f, tmp, err := createTemp(dir, path, base, m)
	if err != nil {
		dir.Close()
		return nil, err
	}
	return &File{f: f, dir: dir, path: path, base: base, tmp: tmp, mode: m}, nil
}

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// SkipSync makes Commit rename without syncing first: for files whose
// reader checks them whole (a cache entry's checksum), durability is not
// worth a disk flush.
func (f *File) SkipSync() { f.nosync = true }

// Commit syncs the file and renames it over the destination.
func (f *File) Commit() error {
	if f.ended {
		return fmt.Errorf("writing %s (already closed)", f.path)
	}
	f.ended = true
	defer f.dir.Close()
	fail := func(err error) error {
		f.f.Close()
		unix.Unlinkat(int(f.dir.Fd()), f.tmp, 0)
		return fmt.Errorf("writing %s (%w)", f.path, err)
	}
	if !f.nosync {
		if err := f.f.Sync(); err != nil {
			return fail(unwrap(err))
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.f.Fd()), &st); err != nil {
		return fail(err)
	}
	// Checked again right before the rename: the destination may have
	// become a symlink or another user's file since Create.
	if err := checkDest(f.dir, f.path, f.base); err != nil {
		f.f.Close()
		unix.Unlinkat(int(f.dir.Fd()), f.tmp, 0)
		return err
	}
	dfd := int(f.dir.Fd())
	if err := unix.Renameat(dfd, f.tmp, dfd, f.base); err != nil {
		return fail(err)
	}
	f.f.Close()
	var got unix.Stat_t
	if err := unix.Fstatat(dfd, f.base, &got, unix.AT_SYMLINK_NOFOLLOW); err != nil || got.Dev != st.Dev || got.Ino != st.Ino {
		return fmt.Errorf("writing %s (the file was replaced while it was written; write into a directory only you can change)", f.path)
	}
	if !f.nosync {
		f.dir.Sync() // the rename itself durable (best effort: some filesystems refuse)
	}
	return nil
}

// Abort removes the temporary file; the destination is left as it was.
func (f *File) Abort() {
	if f.ended {
		return
	}
	f.ended = true
	f.f.Close()
	unix.Unlinkat(int(f.dir.Fd()), f.tmp, 0)
	f.dir.Close()
}

// CreateAt starts writing the file name in the directory dir (an open
// descriptor the caller has already checked, such as a private cache
// directory): the same temporary name, checks and rename as Create, with
// no path walked. dir stays the caller's: Commit and Abort leave it open.
func CreateAt(dir *os.File, name string, m Mode) (*File, error) {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return nil, fmt.Errorf("cannot write %q (not a plain file name)", name)
	}
	path := filepath.Join(dir.Name(), name)
	// A duplicate of dir, so that Commit and Abort close only their own.
	fd, err := unix.FcntlInt(dir.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot write %s (%v)", path, err)
	}
	d := os.NewFile(uintptr(fd), dir.Name())
	if err := checkDest(d, path, name); err != nil {
		d.Close()
		return nil, err
	}
	f, tmp, err := createTemp(d, path, name, m)
	if err != nil {
		d.Close()
		return nil, err
	}
	return &File{f: f, dir: d, path: path, base: name, tmp: tmp, mode: m}, nil
}

// WriteFile writes data to path as one whole file.
func WriteFile(path string, data []byte, m Mode) error {
	f, err := Create(path, m)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return fmt.Errorf("writing %s (%v; check the free space)", path, unwrap(err))
	}
	return f.Commit()
}

// Check tells, before any work is done, whether path could be written:
// the same checks as Create, and a temporary file created and removed.
func Check(path string) error {
	f, err := Create(path, Private)
	if err != nil {
		return err
	}
	f.Abort()
	return nil
}

// openDir opens the directory that will hold path.
func openDir(path string) (*os.File, string, error) {
	if path == "" {
		return nil, "", fmt.Errorf("cannot write an empty path (give a file name)")
	}
	base := filepath.Base(path)
	if base == "." || base == ".." || base == "/" || path[len(path)-1] == '/' {
		return nil, "", fmt.Errorf("cannot write %s (it names a directory; give a file name)", path)
	}
	dir, err := openParent(filepath.Dir(path))
	if err != nil {
		return nil, "", fmt.Errorf("cannot write %s (%v)", path, err)
	}
	return dir, base, nil
}

// openParent opens directory name (walkDir) to make or replace a file in
// it, refusing one every user may write to that is not sticky.
func openParent(name string) (*os.File, error) {
	fd, err := walkDir(name)
	if err != nil {
		return nil, err
	}
	dir := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		dir.Close()
		return nil, err
	}
	if st.Mode&unix.S_IWOTH != 0 && st.Mode&unix.S_ISVTX == 0 {
		dir.Close()
		return nil, fmt.Errorf("%s is writable by every user and not sticky: another user could replace the file; write elsewhere or chmod +t the directory", name)
	}
	return dir, nil
}

// maxLinks bounds the symlinks followed in one directory path, as the
// kernel's own limit (40) does.
const maxLinks = 40

// walkDir opens directory name one component at a time, following a
// symlink only when it belongs to root or to stackshot's effective user:
// another user's link (a /tmp/dir planted to point at /etc) would make root
// replace a file the user chose nothing about. The kernel's
// protected_symlinks does this only in sticky directories, and only when
// enabled.
func walkDir(name string) (int, error) {
	start := "."
	if filepath.IsAbs(name) {
		start = "/"
	}
	cur, err := unix.Open(start, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	comps := splitPath(name)
	links := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		if c == "." {
			continue
		}
		next, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(cur)
			return -1, fmt.Errorf("%v at %q; check the directory exists", err, c)
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			unix.Close(cur)
			return -1, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			unix.Close(cur)
			cur = next
		case unix.S_IFLNK:
			if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
				unix.Close(next)
				unix.Close(cur)
				return -1, fmt.Errorf("the directory path goes through %q, a symbolic link of uid %d; stackshot follows only root's or its own: give the real directory", c, st.Uid)
			}
			links++
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(next, "", buf)
			unix.Close(next)
			if err != nil || links > maxLinks || n == 0 || n >= len(buf) {
				unix.Close(cur)
				return -1, fmt.Errorf("cannot follow the symbolic link %q (%v)", c, err)
			}
			target := string(buf[:n])
			comps = append(splitPath(target), comps...)
			if filepath.IsAbs(target) {
				unix.Close(cur)
				if cur, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
					return -1, err
				}
			}
		default:
			unix.Close(next)
			unix.Close(cur)
			return -1, fmt.Errorf("%q is not a directory", c)
		}
	}
	// An O_PATH descriptor cannot be synced: reopen it for reading.
	fd, err := unix.Openat(cur, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(cur)
	return fd, err
}

// splitPath splits a path into its non-empty components.
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// checkDest refuses a destination that exists and is not a regular file
// owned by our effective user.
func checkDest(dir *os.File, path, base string) error {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot write %s (%v)", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("cannot write %s (it is a symbolic link; stackshot never writes through one: give the link's target or remove the link)", path)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("cannot write %s (it exists and is not a regular file; give another name)", path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("cannot write %s (it belongs to uid %d, not to uid %d that stackshot runs as; remove it or give another name)", path, st.Uid, os.Geteuid())
	}
	return nil
}

// createTemp creates a new file under a random name beside the destination,
// never opening anything that was there before.
func createTemp(dir *os.File, path, base string, m Mode) (*os.File, string, error) {
	prefix := base
	if len(prefix) > 200 { // NAME_MAX is 255
		prefix = prefix[:200]
	}
	var lastErr error
	for range 8 {
		var rnd [8]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, "", fmt.Errorf("cannot write %s (%v)", path, err)
		}
		tmp := "." + prefix + ".stackshot-" + hex.EncodeToString(rnd[:])
		fd, err := unix.Openat(int(dir.Fd()), tmp,
			unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("cannot write %s (%v; check the directory is writable)", path, err)
		}
		if err := unix.Fchmod(fd, uint32(m.Perm())); err != nil {
			unix.Close(fd)
			unix.Unlinkat(int(dir.Fd()), tmp, 0)
			return nil, "", fmt.Errorf("cannot write %s (%v)", path, err)
		}
		return os.NewFile(uintptr(fd), filepath.Join(filepath.Dir(path), tmp)), tmp, nil
	}
	return nil, "", fmt.Errorf("cannot write %s (%v: no free temporary name)", path, lastErr)
}

// unwrap drops the *PathError wrapper, whose text repeats the temporary
// name.
func unwrap(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
