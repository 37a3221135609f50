//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"stackshot/procmaps"
)

// foreignCode names the first file pid maps executable (its program, its
// libraries, a JIT's file) that a user other than stackshot's, or root,
// could have written: a file owned by another user or writable by its
// group (unless root's) or by anyone, or one in a directory, at any level
// up to the target's root, that such a user owns or may write in (but for
// a sticky one, as /tmp, where they cannot replace it). "" when there
// is none. A process of stackshot's own user that runs such code runs
// what that user chose: its bytes go to the child (Needed).
//
// A file is looked at through /proc/PID/map_files (the inode mapped,
// whatever its name now); its directories through the target's root, by
// the path the kernel gives the mapping. A file that cannot be looked at,
// or whose path now names another file, counts as foreign.
func foreignCode(pid int, maps []procmaps.Mapping) string {
	me := uint32(os.Geteuid())
	root := procmaps.RootPath(pid)
	dirs := map[string]bool{} // checked, and found trusted
	done := map[[2]uint64]bool{}
	for i := range maps {
		m := &maps[i]
		if m.Kind != procmaps.KindFile || !m.Executable() || done[[2]uint64{m.Dev(), m.Inode}] {
			continue
		}
		done[[2]uint64{m.Dev(), m.Inode}] = true
		var st unix.Stat_t
		if err := unix.Stat(procmaps.MapFilesPath(pid, m), &st); err != nil {
			return fmt.Sprintf("%s (not looked at: %v)", m.Path, err)
		}
		if why := foreignFile(&st, me); why != "" {
			return m.Path + " (" + why + ")"
		}
		if m.Deleted {
			continue // (its directory no longer holds it)
		}
		var named unix.Stat_t
		if err := unix.Stat(root+m.Path, &named); err != nil || named.Dev != st.Dev || named.Ino != st.Ino {
			return m.Path + " (its path names another file now)"
		}
		for dir := path.Dir(m.Path); ; dir = path.Dir(dir) {
			if !dirs[dir] {
				if why := foreignDir(root+dir, me); why != "" {
					return m.Path + " (" + dir + ": " + why + ")"
				}
				dirs[dir] = true
			}
			if dir == "/" || dir == "." {
				break
			}
		}
	}
	return ""
}

// trustedOwner reports whether uid is stackshot's user or root.
func trustedOwner(uid, me uint32) bool { return uid == me || uid == 0 }

// foreignFile says why a mapped file is not trusted ("": it is).
func foreignFile(st *unix.Stat_t, me uint32) string {
	switch {
	case !trustedOwner(st.Uid, me):
		return fmt.Sprintf("owned by uid %d", st.Uid)
	case st.Mode&0o002 != 0:
		return "writable by anyone"
	case st.Mode&0o020 != 0 && st.Gid != 0:
		return fmt.Sprintf("writable by group %d", st.Gid)
	}
	return ""
}

// foreignDir says why directory dir (as stackshot sees it) is not trusted
// to hold a file of root's or stackshot's user ("": it is). A sticky one
// others may write in (/tmp) is: they cannot rename or remove such a file.
func foreignDir(dir string, me uint32) string {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err.Error()
	}
	writable := st.Mode&0o002 != 0 || st.Mode&0o020 != 0 && st.Gid != 0
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return "not a directory"
	case !trustedOwner(st.Uid, me):
		return fmt.Sprintf("owned by uid %d", st.Uid)
	case writable && st.Mode&unix.S_ISVTX == 0:
		return "writable by others"
	}
	return ""
}
