package symtab

import "os"

// Opener opens every file a Symbolizer reads: module files, separate debug
// files, perf maps and kallsyms. The default (SystemOpener) opens them
// here with the checks of openIn; a sandboxed symbolizer (see package
// sandbox) asks its privileged parent instead, which opens them with those
// same checks and hands over the descriptor.
//
// Every file returned must be a regular file opened read-only; the
// Symbolizer checks nothing about how it was found.
type Opener interface {
	// Open opens p: inside root (the target's "/proc/PID/root", resolved
	// there, never out of it) when root is neither "" nor "/", else on
	// the host. follow=false refuses a symlink as p's last component.
	Open(root, p string, follow bool) (*os.File, error)
	// OpenPerfMap opens the perf map of the live process pid, its
	// /tmp/perf-PID.map inside root (or the one named with the pid of
	// its own PID namespace): only a regular file owned by the target's
	// user or by root, never through a final symlink.
	OpenPerfMap(pid int, root string) (*os.File, error)
}

// SystemOpener is the Opener that opens files itself (see openIn).
type SystemOpener struct{}

// KallsymsPath is where kernel symbols are read (through the Opener).
const KallsymsPath = "/proc/kallsyms"

// opener is the Symbolizer's Opener.
func (s *Symbolizer) opener() Opener {
	if s.opts.Opener != nil {
		return s.opts.Opener
	}
	return SystemOpener{}
}
