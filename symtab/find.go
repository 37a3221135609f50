package symtab

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// joinRoot places p (a path as the target sees it) under root.
func joinRoot(root, p string) string {
	if root == "" || root == "/" {
		return p
	}
	return strings.TrimSuffix(root, "/") + "/" + strings.TrimPrefix(path.Clean("/"+p), "/")
}

// openModuleFile finds the file behind ref. See Symbolizer.Module.
//
// Candidates: ref.MapFiles (the exact inode mapped), then ref.Path inside
// ref.Root (resolved there with openat2, see openIn), or on the host when
// no root is given (a saved capture), or after the sysroot an operator gave
// (ThenHost). A live target's root is never left for the host: its paths
// mean nothing there.
func (s *Symbolizer) openModuleFile(ref ModuleRef) (*openFile, error) {
	type cand struct {
		root, path string
		trusted    bool // the exact inode mapped
	}
	var cands []cand
	if ref.MapFiles != "" {
		cands = append(cands, cand{"", ref.MapFiles, true})
	}
	if ref.Path != "" && strings.HasPrefix(ref.Path, "/") {
		cands = append(cands, cand{ref.Root, ref.Path, false})
		if ref.ThenHost && ref.Root != "" {
			cands = append(cands, cand{"", ref.Path, false})
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("module %q: %w", ref.Path, ErrNotFound)
	}
	inodeKnown := ref.Dev != 0 && ref.Inode != 0
	var mismatch *openFile
	var errs []error
	for _, c := range cands {
		// Map paths are canonical (the kernel resolved them): a symlink
		// there now is not what was mapped.
		f, err := s.openELF(c.root, c.path, c.trusted)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		inodeOK := inodeKnown && f.dev == ref.Dev && f.ino == ref.Inode
		var ok bool
		switch {
		case ref.BuildID != "":
			ok = f.buildID == ref.BuildID
		default:
			ok = c.trusted || inodeOK || !inodeKnown
		}
		if ok {
			if mismatch != nil {
				mismatch.close()
			}
			return f, nil
		}
		f.close()
		if mismatch == nil {
			mismatch = &openFile{name: joinRoot(c.root, c.path), buildID: f.buildID, mismatch: true}
		}
		if c.trusted {
			// The very inode that is mapped carries another build id:
			// any other path can only be worse.
			break
		}
	}
	if f := s.fetchModuleFile(ref); f != nil {
		return f, nil // not on disk, or another build there: by build id
	}
	if mismatch != nil {
		return mismatch, nil
	}
	return nil, fmt.Errorf("module %q: %w: %w", ref.Path, ErrNotFound, errors.Join(errs...))
}
