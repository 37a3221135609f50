//go:build linux

package sandbox

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reachableAs reports whether a user of uid and gid (and no other group)
// could reach path inside root (as the parent opened it for the child:
// root "" is stackshot's own) and find there the file st describes: every
// directory on the way searchable by that user, as the kernel checks it.
// The file itself is not opened for reading: only its directories are
// searched (O_PATH), its mode is mayRead's to judge.
//
// The lookup is the kernel's, made with that user's file-system
// credentials on a thread of its own (setfsuid and setfsgid are a
// thread's, and changing them from root drops the thread's file
// capabilities), from a descriptor of root opened as root, symlinks
// resolved inside root as the parent's open resolves them
// (RESOLVE_IN_ROOT) and never through /proc's magic links. The thread's
// credentials are set back after; a thread that could not be set back
// ends with its goroutine (it stays locked).
func reachableAs(uid, gid int, root, path string, follow bool, st *unix.Stat_t) bool {
	if !strings.HasPrefix(path, "/") {
		return false
	}
	if root == "" {
		root = "/"
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(rootFD)
	groups, err := unix.Getgroups()
	if err != nil {
		return false
	}
	reached := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		ok := false
		if asUser(uid, gid) == nil {
			ok = sameFileAt(rootFD, path, follow, st)
		}
		if asUser(0, 0) == nil && setThreadGroups(groups) == nil {
			runtime.UnlockOSThread()
		}
		reached <- ok
	}()
	return <-reached
}

// asUser sets the calling thread's file-system uid and gid, and empties
// its supplementary groups (setgroups(2) itself: Go's applies to every
// thread).
func asUser(uid, gid int) error {
	if uid != 0 {
		if err := setThreadGroups(nil); err != nil {
			return err
		}
	}
	unix.Setfsgid(gid)
	unix.Setfsuid(uid)
	// (they return the former ids, never an error: read them back)
	u, _ := unix.SetfsuidRetUid(-1)
	g, _ := unix.SetfsgidRetGid(-1)
	if u != uid || g != gid {
		return errors.New("file-system ids not set")
	}
	return nil
}

// setThreadGroups sets the calling thread's supplementary groups.
func setThreadGroups(groups []int) error {
	gs := make([]uint32, len(groups))
	for i, g := range groups {
		gs[i] = uint32(g)
	}
	var p unsafe.Pointer
	if len(gs) > 0 {
		p = unsafe.Pointer(&gs[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gs)), uintptr(p), 0); e != 0 {
		return e
	}
	return nil
}

// sameFileAt looks path up from dirfd (its root) and reports whether it
// names the file st describes.
func sameFileAt(dirfd int, path string, follow bool, st *unix.Stat_t) bool {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	if !follow {
		how.Flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat2(dirfd, path, &how)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var got unix.Stat_t
	return unix.Fstat(fd, &got) == nil && got.Dev == st.Dev && got.Ino == st.Ino
}

// reachable is reachableAs for the user mayRead judges by: the target's
// (its uid and gid; for a saved file, the file's owner: the child learns
// nothing its author could not read), or, when that is unknown, the
// child's own, a user of nothing (so what anyone may reach). Without
// root, stackshot's own open already was a user's.
func (c *Child) reachable(root, path string, follow bool, st *unix.Stat_t) bool {
	if os.Geteuid() != 0 {
		return true
	}
	uid, gid := c.t.UID, c.t.GID
	if uid < 0 || gid < 0 {
		if c.user == nil {
			return false
		}
		uid, gid = int(c.user.uid), int(c.user.gid)
	}
	return reachableAs(uid, gid, root, path, follow, st)
}
