package procmaps

import (
	"os"
	"sync"
)

// SameMountNamespace reports whether process pid is in stackshot's own
// mount namespace (false when either cannot be read).
func SameMountNamespace(pid int) bool {
	return sameMountNS(pidPath(pid, "ns", "mnt"))
}

func sameMountNS(link string) bool {
	theirs, err := os.Readlink(link)
	ours := ownRoot()
	return err == nil && ours.ns != "" && theirs == ours.ns
}

// SharesRoot reports whether process pid (read through its thread tid when
// tid is not 0: its main thread has exited) sees the filesystem as
// stackshot does, the same mount namespace and the same root directory:
// a path inside its root (RootPath) is then the host's path. false when
// in doubt.
func SharesRoot(pid, tid int) bool {
	ns, root := pidPath(pid, "ns", "mnt"), RootPath(pid)
	if tid != 0 {
		ns, root = taskPath(pid, tid, "ns/mnt"), TaskRootPath(pid, tid)
	}
	if !sameMountNS(ns) {
		return false
	}
	theirs, err := os.Stat(root)
	ours := ownRoot()
	return err == nil && ours.dir != nil && os.SameFile(theirs, ours.dir)
}

type rootInfo struct {
	ns  string      // our mount namespace ("" unknown)
	dir os.FileInfo // our root directory (nil unknown)
}

var ownRoot = sync.OnceValue(func() rootInfo {
	var r rootInfo
	r.ns, _ = os.Readlink(Proc + "/self/ns/mnt")
	if fi, err := os.Stat("/"); err == nil {
		r.dir = fi
	}
	return r
})
