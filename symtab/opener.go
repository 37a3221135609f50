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

// Candidate is one of the files a lookup tries in turn (Open's root and
// p): a separate debug file's possible places, most of which do not exist.
type Candidate struct {
	Root, Path string
}

// FirstOpener is an Opener that also opens, in one call, the first of
// cands that Open would open (following symlinks): its index in cands
// and the file, or the error of the last. The sandboxed symbolizer's
// opener is one: a call is a round trip to its parent, where most
// candidates are one failed open each.
type FirstOpener interface {
	OpenFirst(cands []Candidate) (int, *os.File, error)
}

// openFirstELF opens the first of cands that opens as an ELF file, at
// or after index from, through the Opener (in one call of a FirstOpener);
// accept says whether it is the one looked for, else it is closed and
// the next is tried. It returns the file and its index, or nil.
func (s *Symbolizer) openFirstELF(cands []Candidate, accept func(f *openFile, i int) bool) *openFile {
	first, _ := s.opener().(FirstOpener)
	for from := 0; from < len(cands); from++ {
		var f *openFile
		if first == nil {
			var err error
			if f, err = s.openELF(cands[from].Root, cands[from].Path, true); err != nil {
				continue
			}
		} else {
			i, fh, err := first.OpenFirst(cands[from:])
			if err != nil || i < 0 || from+i >= len(cands) {
				if err == nil && fh != nil {
					fh.Close()
				}
				return nil
			}
			from += i
			if f, err = s.wrapELF(fh, cands[from].Root, cands[from].Path); err != nil {
				continue
			}
		}
		if accept(f, from) {
			return f
		}
		f.close()
	}
	return nil
}

// OpenModule opens a module's file p as the symbolizer's own lookups do
// (through its Opener: in a sandboxed child, by asking the parent): inside
// root first when root is neither "" nor "/", then on the host.
func (s *Symbolizer) OpenModule(root, p string) (*os.File, error) {
	if root != "" && root != "/" {
		if f, err := s.opener().Open(root, p, true); err == nil {
			return f, nil
		}
	}
	return s.opener().Open("", p, true)
}
