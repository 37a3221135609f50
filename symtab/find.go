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
func openModuleFile(ref ModuleRef) (*openFile, error) {
	type cand struct {
		path    string
		trusted bool // the exact inode mapped
	}
	var cands []cand
	if ref.MapFiles != "" {
		cands = append(cands, cand{ref.MapFiles, true})
	}
	if ref.Path != "" && strings.HasPrefix(ref.Path, "/") {
		if ref.Root != "" && ref.Root != "/" {
			cands = append(cands, cand{joinRoot(ref.Root, ref.Path), false})
		}
		cands = append(cands, cand{ref.Path, false})
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("module %q: %w", ref.Path, ErrNotFound)
	}
	inodeKnown := ref.Dev != 0 && ref.Inode != 0
	var mismatch *openFile
	var errs []error
	for _, c := range cands {
		f, err := openELF(c.path)
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
			mismatch = &openFile{name: c.path, buildID: f.buildID, mismatch: true}
		}
		if c.trusted {
			// The very inode that is mapped carries another build id:
			// any other path can only be worse.
			break
		}
	}
	if mismatch != nil {
		return mismatch, nil
	}
	return nil, fmt.Errorf("module %q: %w: %w", ref.Path, ErrNotFound, errors.Join(errs...))
}
