package symtab

import (
	"debug/elf"
	"errors"
)

// fileByBuildID looks under the debug roots (and inside root) for a file
// of build id id, as a build-id tree holds them:
// DEBUGDIR/.build-id/xx/rest.debug (a separate debug file) and
// DEBUGDIR/.build-id/xx/rest (the binary itself). It stands in for a
// module whose own file is missing or another build: the build id proves
// it describes the code that ran. nil when none is found.
func (s *Symbolizer) fileByBuildID(id, root string) *openFile {
	if len(id) < 3 {
		return nil
	}
	roots := []string{""}
	if root != "" && root != "/" {
		roots = append(roots, root)
	}
	var cands []Candidate
	for _, d := range s.debugDirs() {
		for _, r := range roots {
			for _, suffix := range []string{"", ".debug"} {
				cands = append(cands, Candidate{r, buildIDPath(d, id, suffix)})
			}
		}
	}
	return s.openFirstELF(cands, func(f *openFile, _ int) bool { return f.buildID == id && f.ef != nil })
}

// standIn replaces a missing or mismatched module file by the file of the
// mapped build id from the debug roots, when there is one.
func (s *Symbolizer) standIn(ref ModuleRef, f *openFile, err error) (*openFile, error) {
	if ref.BuildID == "" || !(err != nil && errors.Is(err, ErrNotFound) || err == nil && f.mismatch) {
		return f, err
	}
	alt := s.fileByBuildID(ref.BuildID, ref.searchRoot())
	if alt == nil {
		return f, err
	}
	if f != nil {
		f.close()
	}
	return alt, nil
}

// hasCode reports whether the file holds the module's code: a separate
// debug file keeps the section headers but not the bytes (.text NOBITS).
func hasCode(f *openFile) bool {
	if f == nil || f.ef == nil {
		return false
	}
	for _, s := range f.ef.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Size > 0 {
			return s.Type != elf.SHT_NOBITS
		}
	}
	return true
}
