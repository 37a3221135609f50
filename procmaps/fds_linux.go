//go:build linux

package procmaps

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"stackshot/report"
)

// FDReader names the file descriptors of one process from its /proc:
// the fd links, fdinfo, and the network tables of the process's own
// network namespace (/proc/PID/net/...), each table read at most once,
// only for the sockets asked for (Want before Name).
type FDReader struct {
	pid     int
	sockets map[uint64]string // inode -> name ("" not found)
	read    bool
}

// NewFDReader reads pid's descriptors.
func NewFDReader(pid int) *FDReader {
	return &FDReader{pid: pid, sockets: map[uint64]string{}}
}

// link reads /proc/PID/fd/N (the kernel's text for it, at most a path's
// length).
func (r *FDReader) link(fd int) (string, bool) {
	var buf [unix.PathMax + 64]byte
	n, err := unix.Readlink(pidPath(r.pid, "fd", strconv.Itoa(fd)), buf[:])
	if err != nil || n <= 0 || n >= len(buf) {
		return "", false
	}
	return string(buf[:n]), true
}

// info reads /proc/PID/fdinfo/N; full says it was not cut at the bound.
func (r *FDReader) info(fd int, parse func(b []byte, full bool)) bool {
	return readSmall(pidPath(r.pid, "fdinfo", strconv.Itoa(fd)), func(b []byte) { parse(b, len(b) < maxProcFile) }) == nil
}

// Want notes the descriptors that will be named, so that the network
// tables are read once for all their sockets.
func (r *FDReader) Want(fds []int) {
	for _, fd := range fds {
		if l, ok := r.link(fd); ok {
			if k, ino := FDKind(l); k == report.FDSocket && ino != 0 {
				if _, seen := r.sockets[ino]; !seen {
					r.sockets[ino] = ""
					r.read = false
				}
			}
		}
	}
}

// tables reads the network tables for the sockets wanted and not yet
// looked for.
func (r *FDReader) tables() {
	if r.read || len(r.sockets) == 0 {
		return
	}
	r.read = true
	want := map[uint64]string{}
	for ino, name := range r.sockets {
		if name == "" {
			want[ino] = ""
		}
	}
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6", "unix"} {
		f, err := os.Open(pidPath(r.pid, "net", proto))
		if err != nil {
			continue
		}
		NetTable(f, proto, want)
		f.Close()
	}
	for ino, name := range want {
		r.sockets[ino] = name
	}
}

// Name says what descriptor fd of the process is. It reads the link, then
// what the link points at, then the link again: a descriptor closed or
// reused meanwhile (another inode, or another text) is not named.
func (r *FDReader) Name(fd int) (report.FD, bool) {
	l, ok := r.link(fd)
	if !ok {
		return report.FD{}, false
	}
	kind, ino := FDKind(l)
	out := report.FD{Num: fd, Kind: kind, Target: l}
	var fileIno uint64
	r.info(fd, func(b []byte, _ bool) { fileIno = FDInode(b) })
	if kind == report.FDSocket && ino != 0 {
		if _, asked := r.sockets[ino]; !asked {
			r.sockets[ino] = ""
			r.read = false
		}
		r.tables()
		if name := r.sockets[ino]; name != "" && name != ambiguous {
			out.Target = name
		}
	}
	again, ok := r.link(fd)
	if !ok || again != l {
		return report.FD{}, false
	}
	var inoAgain uint64
	r.info(fd, func(b []byte, _ bool) { inoAgain = FDInode(b) })
	if inoAgain != fileIno || (ino != 0 && fileIno != 0 && fileIno != ino) {
		return report.FD{}, false
	}
	return out, true
}

// EpollWatched reads which descriptors the epoll instance epfd watches:
// at most max of them, and how many there are (-1: more than the bound
// of what is read).
func (r *FDReader) EpollWatched(epfd, max int) ([]int, int, bool) {
	var fds []int
	total := -1
	ok := r.info(epfd, func(b []byte, full bool) {
		fds, total = EpollTargets(b, max)
		if !full {
			total = -1
		}
	})
	return fds, total, ok
}
