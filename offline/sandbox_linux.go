//go:build linux

package offline

import (
	"os"
	"syscall"

	"stackshot/capfile"
	"stackshot/report"
	"stackshot/sandbox"
)

// SandboxConfig configures the sandboxed children that read saved files.
type SandboxConfig = sandbox.Config

// readSandboxed reads and resolves the saved file f in a sandboxed child.
// When none starts, the file is not read (err says why): it is never read
// in-process then (ok is always true).
func (r *Reader) readSandboxed(f *os.File, size int64, path string) (procs []*report.Process, failed int, err error, ok bool) {
	cfg := r.o.Sandbox
	cfg.Resolve = r.o.Resolve
	// (the error of a child that never started says why: not said twice)
	// The file's owner stands for the target's user: the child is given
	// the files that user could read (a capture root made: root's).
	owner := sandbox.Target{UID: -1, GID: -1}
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			owner.UID, owner.GID = int(st.Uid), int(st.Gid)
		}
	}
	child := sandbox.TryStart(cfg, owner, path, func(string) {})
	procs, failed, err = r.readInChild(child, f, size, path)
	return procs, failed, err, true
}

// readInChild has child read and resolve the saved capture f (size
// bytes; path names it) and ends it: nothing of the file is parsed here.
// A failed child costs the file, said so.
func (r *Reader) readInChild(child *sandbox.Child, f *os.File, size int64, path string) ([]*report.Process, int, error) {
	defer child.Close()
	sr, err := child.Saved(f, size, r.o.TIDs)
	r.boxExpired = r.boxExpired || child.Expired()
	r.boxBudget = r.boxBudget || child.BudgetExceeded()
	if err != nil {
		return nil, 0, capfile.LoadError(path, err)
	}
	for _, l := range sr.Lines {
		r.o.Say(l)
	}
	return sr.Procs, sr.Failed, nil
}
