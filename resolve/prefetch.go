package resolve

import (
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/symtab"
)

// moduleRef says how the symbolizer finds the file behind mapping m of the
// space's process (first: the mapping of m's file at offset 0).
func (s *Space) moduleRef(m, first *procmaps.Mapping) symtab.ModuleRef {
	ref := symtab.ModuleRef{
		Path:    m.Path,
		Dev:     m.Dev(),
		Inode:   m.Inode,
		BuildID: s.p.BuildIDs[first.Start],
	}
	if !s.r.opts.Live && s.r.opts.Sysroot != "" && s.r.opts.Sysroot != "/" {
		ref.Root, ref.ThenHost = s.r.opts.Sysroot, true
	}
	if s.r.opts.Live {
		ref.Root, ref.SharedRoot = rootPath(s.p), s.p.SharedRoot
		if s.p.MemTID == 0 {
			// (An exited main thread's map_files are gone with its mm.)
			ref.MapFiles = procmaps.MapFilesPath(s.p.PID, m)
		}
	}
	return ref
}

// PrefetchDebug fetches, in parallel, the separate debug files that the
// executable modules of p lack on disk, through the symbolizer's fetcher
// (symtab.Options.FetchDebug, debuginfod), so that naming the frames then
// finds them at once instead of fetching module after module. Call it
// after the capture, when every thread runs again. Without a fetcher it
// does nothing.
func (r *Resolver) PrefetchDebug(p *ptrace.Process) {
	if !r.sym.Fetches() {
		return
	}
	s := r.Space(p, nil)
	var refs []symtab.ModuleRef
	seen := map[string]bool{}
	for i := range s.maps {
		m := &s.maps[i]
		if !m.Executable() || (m.Kind != procmaps.KindFile && m.Kind != procmaps.KindMemfd) {
			continue
		}
		ref := s.moduleRef(m, s.maps.FirstOfFile(m))
		if ref.BuildID == "" || seen[ref.BuildID] {
			continue
		}
		seen[ref.BuildID] = true
		refs = append(refs, ref)
	}
	r.sym.PrefetchDebug(refs)
}
