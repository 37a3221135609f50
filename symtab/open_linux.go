//go:build linux

package symtab

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// errNoOpenat2 is the error of opening a path inside a target's root on a
// kernel without openat2 (before Linux 5.6): such paths cannot be resolved
// safely (an absolute symlink in the target's tree would resolve against
// stackshot's root), so only /proc/PID/map_files is used there.
var errNoOpenat2 = errors.New("openat2 unavailable (kernel before 5.6): files inside the target's root are not opened, only map_files")

// openIn opens p for reading and keeps it only when it is a regular file.
//
// With a root ("/proc/PID/root"), p is resolved inside it with openat2
// RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS: ".." and absolute symlinks stay in
// the target's tree and /proc magic links are refused, so a container
// cannot point stackshot at a host file. Without one, p is a host path
// (a map_files entry, the operator's debug dirs).
//
// follow=false refuses a symlink as the last component. The path is
// resolved once, with O_PATH (which opens nothing: no FIFO or device open
// happens), the descriptor is checked with fstat, and only a regular file
// is then opened for reading through /proc/self/fd: the same inode, never
// the path a second time.
func openIn(root, p string, follow bool) (*os.File, *unix.Stat_t, error) {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	var fd int
	var err error
	name := p
	if root != "" && root != "/" {
		name = joinRoot(root, p)
		fd, err = openInRoot(root, p, flags)
	} else {
		fd, err = unix.Open(p, flags, 0)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, fmt.Errorf("fstat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil, fmt.Errorf("open %s: not a regular file", name)
	}
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	var st2 unix.Stat_t
	if err := unix.Fstat(rfd, &st2); err != nil || st2.Dev != st.Dev || st2.Ino != st.Ino || st2.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(rfd)
		return nil, nil, fmt.Errorf("open %s: file changed while opened", name)
	}
	return os.NewFile(uintptr(rfd), name), &st2, nil
}

// openInRoot resolves p inside root (see openIn).
func openInRoot(root, p string, flags int) (int, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rfd)
	rel := strings.TrimLeft(p, "/")
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		return -1, errNoOpenat2
	}
	return fd, err
}

// openRegular opens a host path (following symlinks) as a regular file.
func openRegular(path string) (*os.File, *unix.Stat_t, error) {
	return openIn("", path, true)
}

// openPlain opens a regular host file read-only and non-blocking.
func openPlain(path string) (*os.File, error) {
	f, _, err := openRegular(path)
	return f, err
}

// Open implements Opener with openIn.
func (SystemOpener) Open(root, p string, follow bool) (*os.File, error) {
	f, _, err := openIn(root, p, follow)
	return f, err
}

// OpenPerfMap implements Opener: the map inside root, without following a
// final symlink, owned by the target's real or effective user or by root.
// A JIT in a PID namespace names the file with its own pid, so the
// innermost pid from /proc/PID/status (NSpid) is tried too.
func (SystemOpener) OpenPerfMap(pid int, root string) (*os.File, error) {
	st := readProcStatus(pid)
	if !st.ok {
		return nil, fmt.Errorf("perf map of process %d: its owner is unknown", pid)
	}
	owners := []uint32{0, st.ruid, st.euid}
	pids := []int{pid}
	if st.nspid > 0 && st.nspid != pid {
		pids = append(pids, st.nspid)
	}
	var first error
	for _, p := range pids {
		f, err := openPerfMap(root, fmt.Sprintf("/tmp/perf-%d.map", p))
		if err == nil {
			if uid, ok := fileOwner(f); ok && slices.Contains(owners, uid) {
				return f, nil
			}
			f.Close()
			err = fmt.Errorf("perf map of process %d: owned by another user", pid)
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// openELF opens p (inside root, through the Opener) and parses its ELF
// headers.
func (s *Symbolizer) openELF(root, p string, follow bool) (*openFile, error) {
	fh, err := s.opener().Open(root, p, follow)
	if err != nil {
		return nil, err
	}
	return s.wrapELF(fh, root, p)
}

// wrapELF parses fh, opened as root and p, as an ELF file (fh is closed
// on an error).
func (s *Symbolizer) wrapELF(fh *os.File, root, p string) (*openFile, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fh.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		fh.Close()
		return nil, fmt.Errorf("open %s: not a regular file", p)
	}
	f, err := s.parseFile(fh, st.Size, p)
	if err != nil {
		fh.Close()
		return nil, err
	}
	f.root = root
	f.closer = fh
	id := fileID(&st, "")
	f.dev, f.ino, f.ctime = id.Dev, id.Ino, id.Ctime
	return f, nil
}

// FileIDOf is the identity of fh, a regular file whose build id is id
// (read elsewhere: nothing of fh is parsed).
func FileIDOf(fh *os.File, id string) (FileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fh.Fd()), &st); err != nil {
		return FileID{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return FileID{}, fmt.Errorf("%s: not a regular file", fh.Name())
	}
	return fileID(&st, id), nil
}

func fileID(st *unix.Stat_t, id string) FileID {
	return FileID{BuildID: id, Size: st.Size, Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano()}
}

// fileOwner returns the owner of an opened file.
func fileOwner(f *os.File) (uint32, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, false
	}
	return st.Uid, true
}

// openPerfMap opens a perf map: inside the target's root without
// following a final symlink, or the host file the operator named.
func openPerfMap(root, p string) (*os.File, error) {
	f, _, err := openIn(root, p, root == "")
	return f, err
}
