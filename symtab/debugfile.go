package symtab

import (
	"bytes"
	"debug/elf"
	"hash/crc32"
	"io"
	"path"
	"strings"
)

// systemDebugDir is always searched for separate debug files.
const systemDebugDir = "/usr/lib/debug"

// maxDebugFileBytes bounds a debug file whose CRC is computed.
const maxDebugFileBytes = 8 << 30

// debugDirs lists the debug roots: /usr/lib/debug, then Options.DebugDirs.
func (s *Symbolizer) debugDirs() []string {
	dirs := []string{systemDebugDir}
	for _, d := range s.opts.DebugDirs {
		if d != "" && d != systemDebugDir {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// buildIDPath is where a build-id tree under dir keeps the file of build
// id id (len(id) > 2): dir/.build-id/xx/rest, with suffix (".debug" for a
// separate debug file).
func buildIDPath(dir, id, suffix string) string {
	return dir + "/.build-id/" + id[:2] + "/" + id[2:] + suffix
}

// BuildIDDebugPath is the first place a module of build id id has its
// separate debug file looked for (on the host, following symlinks): the
// system's build-id tree. ok is false for an id too short to be one.
func BuildIDDebugPath(id string) (p string, ok bool) {
	if len(id) <= 2 {
		return "", false
	}
	return buildIDPath(systemDebugDir, id, ".debug"), true
}

// findDebugFile looks for the module's separate debug file in gdb's order:
// DEBUGDIR/.build-id/xx/rest.debug, then the .gnu_debuglink name next to
// the file, in its .debug/ directory, and under DEBUGDIR/<dir of file>.
// Each path is tried on the host and then inside the target's root.
// Last, Options.FetchDebug is asked (debuginfod).
func (m *Module) findDebugFile() *openFile {
	if f := m.findLocalDebugFile(); f != nil {
		return f
	}
	return m.fetchDebugFile()
}

// findLocalDebugFile is findDebugFile on disk only.
func (m *Module) findLocalDebugFile() *openFile {
	roots := []string{""}
	if m.root != "" && m.root != "/" {
		roots = append(roots, m.root)
	}
	// The candidates, tried in one call of a FirstOpener: by build id
	// first, then by the debuglink's name.
	dirs := m.sym.debugDirs()
	var cands []Candidate
	id := m.buildID
	if len(id) > 2 {
		for _, d := range dirs {
			for _, root := range roots {
				// (Build-id links may be symlinks: followed inside the
				// root, never out of it.)
				cands = append(cands, Candidate{root, buildIDPath(d, id, ".debug")})
			}
		}
	}
	byID := len(cands)
	name, crc, ok := debugLink(m.file)
	// (An image from memory, the vdso, has no path to link from.)
	if ok && !m.image && strings.HasPrefix(m.path, "/") {
		dir := path.Dir(m.path)
		names := []string{dir + "/" + name, dir + "/.debug/" + name}
		for _, d := range dirs {
			names = append(names, strings.TrimSuffix(d, "/")+dir+"/"+name)
		}
		for _, c := range names {
			if c == m.path {
				continue
			}
			for _, root := range roots {
				cands = append(cands, Candidate{root, c})
			}
		}
	}
	return m.sym.openFirstELF(cands, func(f *openFile, i int) bool {
		if i < byID {
			return f.buildID == id && hasDebugInfo(f.ef)
		}
		return (f.buildID == "" || id == "" || f.buildID == id) && fileCRC(f) == crc
	})
}

func hasDebugInfo(ef *elf.File) bool {
	for _, s := range ef.Sections {
		if s.Type == elf.SHT_NOBITS {
			continue
		}
		if s.Type == elf.SHT_SYMTAB || s.Name == ".debug_info" || s.Name == ".zdebug_info" {
			return true
		}
	}
	return false
}

// debugLink reads .gnu_debuglink: a file name, padding to 4, a CRC32.
func debugLink(f *openFile) (string, uint32, bool) {
	s := f.ef.Section(".gnu_debuglink")
	if s == nil || s.Size > 4096 {
		return "", 0, false
	}
	b, err := f.data(s)
	if err != nil {
		return "", 0, false
	}
	i := bytes.IndexByte(b, 0)
	if i <= 0 {
		return "", 0, false
	}
	name := string(b[:i])
	if strings.Contains(name, "/") || name == "." || name == ".." {
		return "", 0, false
	}
	off := align4(uint64(i + 1))
	if off+4 > uint64(len(b)) {
		return "", 0, false
	}
	return name, f.ef.ByteOrder.Uint32(b[off:]), true
}

// fileCRC is the CRC32 (IEEE, as gdb computes it) of the whole file.
func fileCRC(f *openFile) uint32 {
	if f.size > maxDebugFileBytes {
		return 0
	}
	h := crc32.NewIEEE()
	r := io.NewSectionReader(f.r, 0, f.size)
	for {
		// In chunks, so that the deadline holds on a huge file too.
		if f.sym != nil && f.sym.expired() != nil {
			return 0
		}
		n, err := io.CopyN(h, r, 16<<20)
		if err == io.EOF || (err == nil && n < 16<<20) {
			return h.Sum32()
		}
		if err != nil {
			return 0
		}
	}
}
