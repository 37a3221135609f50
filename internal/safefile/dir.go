//go:build linux

package safefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OpenDir opens directory path, a store of stackshot's own that it lists,
// reads, renames in and removes from (an OTLP spool), creating it mode 0700
// when it does not exist; what names it in messages ("the spool
// directory"). The directory part of path is walked as Create walks an
// output's (a symbolic link on the way followed only when root or
// stackshot's own user owns it; a directory every user may write to and
// not sticky refused); the last component is opened with openat2
// RESOLVE_NO_SYMLINKS: a symbolic link there is refused, never followed.
// It must be a directory of stackshot's effective user that no other user
// may write to. Every later step is to go through the descriptor
// (unix.Openat, Renameat, Unlinkat, CreateAt, ReadDir), never the path,
// so a directory swapped for a link or another one afterwards is not
// followed.
func OpenDir(path, what string) (*os.File, error) {
	clean := filepath.Clean(path) // ("spool/" is spool, in .)
	base := filepath.Base(clean)
	if path == "" || base == "." || base == ".." || base == "/" {
		return nil, fmt.Errorf("cannot use %q as %s (give the directory by its name, such as /var/spool/stackshot)", path, what)
	}
	parent, err := openParent(filepath.Dir(clean))
	if err != nil {
		return nil, fmt.Errorf("cannot create %s %s or open it (%v)", what, path, err)
	}
	defer parent.Close()
	pfd := int(parent.Fd())
	fd, err := openNoSymlinks(pfd, base)
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("cannot create %s %s (%v; create it or give another)", what, path, err)
		}
		fd, err = openNoSymlinks(pfd, base)
	}
	var lst unix.Stat_t
	switch {
	case err != nil && unix.Fstatat(pfd, base, &lst, unix.AT_SYMLINK_NOFOLLOW) == nil && lst.Mode&unix.S_IFMT == unix.S_IFLNK,
		errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%s %s is a symbolic link (stackshot uses only a real directory: give the link's target)", what, path)
	case errors.Is(err, unix.ENOTDIR):
		return nil, fmt.Errorf("%s %s is not a directory (give a directory)", what, path)
	case err != nil:
		return nil, fmt.Errorf("cannot use %s %s (%v)", what, path, err)
	}
	dir := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		dir.Close()
		return nil, fmt.Errorf("cannot use %s %s (%v)", what, path, err)
	}
	switch {
	case int(st.Uid) != os.Geteuid():
		err = fmt.Errorf("%s %s belongs to uid %d, not to uid %d that stackshot runs as (give a directory of your own)", what, path, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		err = fmt.Errorf("%s %s is writable by other users (they could plant or remove files there; chmod go-w it)", what, path)
	}
	if err != nil {
		dir.Close()
		return nil, err
	}
	return dir, nil
}

// openNoSymlinks opens the directory name in dirfd for reading, following
// no symbolic link (openat2 RESOLVE_NO_SYMLINKS; before Linux 5.6, which
// lacks openat2, O_NOFOLLOW does the same for a single name).
func openNoSymlinks(dirfd int, name string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: flags,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Openat(dirfd, name, flags, 0)
	}
	return fd, err
}
