//go:build linux

package pyruntime

import (
	"io"
	"path/filepath"
	"strings"

	"stackshot/goruntime"
	"stackshot/procmaps"
)

// Candidates are the mapped files of a process that may hold a CPython
// interpreter, the lowest mapping of each: an executable named python*, a
// libpython3.X.so, and any file in evals (the modules whose code runs the
// interpreter's eval function on some thread's stack, see EvalModules:
// uwsgi, a C program that embeds CPython, a python under another name).
// Open then believes only a file with _PyRuntime in its symbols.
func Candidates(exe string, maps procmaps.Maps, evals map[string]bool) []*procmaps.Mapping {
	var out []*procmaps.Mapping
	seen := map[string]bool{}
	for i := range maps {
		m := &maps[i]
		base := filepath.Base(m.Path)
		named := m.Path == exe && strings.HasPrefix(base, "python") || strings.HasPrefix(base, "libpython3.")
		if m.Kind != procmaps.KindFile || seen[m.Path] || !named && !evals[m.Path] {
			continue
		}
		seen[m.Path] = true
		out = append(out, maps.FirstOfFile(m))
	}
	return out
}

// OpenLive opens the interpreter of live process pid (whose memory mem
// reads) in one of cands, each opened through /proc/PID/map_files; the
// files are closed again (a Runtime reads only memory).
func OpenLive(pid int, cands []*procmaps.Mapping, mem io.ReaderAt) (*Runtime, error) {
	var mods []Module
	for _, m := range cands {
		f, size, err := procmaps.OpenMapped(pid, m)
		if err != nil {
			continue
		}
		defer f.Close()
		if bias, ok := goruntime.LoadBias(f, m.Start, m.Offset); ok {
			mods = append(mods, Module{Path: m.Path, File: f, Size: size, Bias: bias})
		}
	}
	return Open(mem, mods)
}
