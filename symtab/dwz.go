package symtab

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/hex"
	"path"
	"strings"
)

// altDWARF is the supplementary file dwz shares among several debug files
// (.gnu_debugaltlink): DW_FORM_GNU_strp_alt names point into its
// .debug_str, DW_FORM_GNU_ref_alt references into its .debug_info.
type altDWARF struct {
	file *openFile
	d    *dwarf.Data
	str  []byte
}

// debugAltLink reads .gnu_debugaltlink: a path, NUL, the build id.
func debugAltLink(f *openFile) (string, string, bool) {
	s := f.ef.Section(".gnu_debugaltlink")
	if s == nil || s.Size > 4096 {
		return "", "", false
	}
	b, err := f.data(s)
	if err != nil {
		return "", "", false
	}
	i := bytes.IndexByte(b, 0)
	if i <= 0 || len(b)-i-1 < 8 {
		return "", "", false
	}
	return string(b[:i]), hex.EncodeToString(b[i+1:]), true
}

// findAltFile opens the dwz file of debug file f: by the path it names
// (relative to f's directory), on the host and inside root, then by build
// id in the debug dirs. Its build id must match.
func (m *Module) findAltFile(f *openFile) *openFile {
	p, id, ok := debugAltLink(f)
	if !ok {
		return nil
	}
	type cand struct{ root, path string }
	var cands []cand
	if !strings.HasPrefix(p, "/") {
		// Relative to the debug file, in the tree it was found in.
		cands = append(cands, cand{f.root, path.Join(path.Dir(f.name), p)})
	} else {
		cands = append(cands, cand{"", p})
		if m.root != "" && m.root != "/" {
			cands = append(cands, cand{m.root, p})
		}
	}
	for _, d := range m.sym.debugDirs() {
		c := buildIDPath(d, id, ".debug")
		cands = append(cands, cand{"", c})
		if m.root != "" && m.root != "/" {
			cands = append(cands, cand{m.root, c})
		}
	}
	for _, c := range cands {
		alt, err := m.sym.openELF(c.root, c.path, true)
		if err != nil {
			continue
		}
		if alt.buildID == id {
			return alt
		}
		alt.close()
	}
	return nil
}

// loadAlt parses the dwz file's DWARF (its units are only read, by
// offset, when a name is looked up).
func loadAlt(f *openFile) *altDWARF {
	sec := func(name string) []byte {
		s := f.ef.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			return nil
		}
		b, err := f.data(s)
		if err != nil {
			return nil
		}
		return b
	}
	a := &altDWARF{file: f, str: sec(".debug_str")}
	err := safely("dwz file", func() error {
		d, err := dwarf.New(sec(".debug_abbrev"), nil, nil, sec(".debug_info"), nil, nil, nil, a.str)
		if err != nil {
			return err
		}
		a.d = d
		return nil
	})
	if err != nil {
		return nil
	}
	return a
}
