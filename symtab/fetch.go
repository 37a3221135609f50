package symtab

import (
	"context"
	"debug/elf"
	"errors"
	"io"
	"sync"

	"stackshot/internal/safeelf"
)

// Files fetched by build id (debuginfod): Options.FetchDebug and
// Options.FetchExecutable return host paths of files already verified by
// the fetcher; they are checked again here like any file on disk (build
// id, debug info) before their symbols are used.

// ErrFetchDeferred is what a fetcher (Options.FetchDebug) returns to say
// "not now": a capture is in progress and nothing may delay it. The module
// is then loaded without a separate debug file, for the capture's own
// needs, and is opened afresh by the next Symbolizer.Module call, which
// asks again.
var ErrFetchDeferred = errors.New("fetch deferred")

// FileBuildID returns the hex GNU build id of the ELF file r of size bytes,
// its headers checked first (internal/safeelf). ErrNoBuildID when it
// carries none.
func FileBuildID(r io.ReaderAt, size int64) (string, error) {
	sf, err := safeelf.Open(r, size, safeelf.NewBudget(0, 0))
	if err != nil {
		return "", err
	}
	return elfBuildID(sf.File, size)
}

// workContext is the context slow work (a fetch, a perf map's parse)
// runs in: Options.Context, or none.
func (s *Symbolizer) workContext() context.Context {
	if s.opts.Context != nil {
		return s.opts.Context
	}
	return context.Background()
}

// wantsFetchedDebug reports whether the module's debug file should be asked
// of Options.FetchDebug: there is a fetcher, the module has a build id, and
// its binary carries no DWARF of its own.
func (m *Module) wantsFetchedDebug() bool {
	if m.sym.opts.FetchDebug == nil || m.buildID == "" || m.mismatch || m.file == nil {
		return false
	}
	return !hasDWARF(m.file.ef)
}

// fetchDebugFile asks Options.FetchDebug for the separate debug file of a
// module none was found for on disk.
func (m *Module) fetchDebugFile() *openFile {
	if !m.wantsFetchedDebug() || m.sym.expired() != nil {
		return nil
	}
	p, err := m.sym.opts.FetchDebug(m.sym.workContext(), m.buildID)
	if errors.Is(err, ErrFetchDeferred) && !m.deferred.Swap(true) {
		m.sym.deferredN.Add(1)
	}
	if err != nil || p == "" {
		return nil
	}
	f, err := m.sym.openELF("", p, true)
	if err != nil {
		return nil
	}
	if f.buildID != m.buildID || !hasDebugInfo(f.ef) {
		f.close()
		return nil
	}
	return f
}

// fetchModuleFile asks Options.FetchExecutable for the file of a module
// that is not on disk (or is another build there): a saved capture read on
// another machine.
func (s *Symbolizer) fetchModuleFile(ref ModuleRef) *openFile {
	if s.opts.FetchExecutable == nil || ref.BuildID == "" || s.expired() != nil {
		return nil
	}
	p, err := s.opts.FetchExecutable(s.workContext(), ref.BuildID)
	if err != nil || p == "" {
		return nil
	}
	f, err := s.openELF("", p, true)
	if err != nil {
		return nil
	}
	if f.buildID != ref.BuildID {
		f.close()
		return nil
	}
	return f
}

// dropDeferred takes the modules whose debug file fetch was deferred out of
// the cache (s.mu held): the next Module call opens them again and asks
// again. They stay open for whoever holds them, until Close.
func (s *Symbolizer) dropDeferred() {
	if s.deferredN.Load() == 0 {
		return
	}
	seen := map[*Module]bool{}
	drop := func(m *Module) bool {
		if !m.deferred.Load() {
			return false
		}
		if !seen[m] {
			seen[m] = true
			s.retired = append(s.retired, m)
			s.deferredN.Add(-1)
		}
		return true
	}
	for k, m := range s.byBuildID {
		if drop(m) {
			delete(s.byBuildID, k)
		}
	}
	for k, m := range s.byInode {
		if drop(m) {
			delete(s.byInode, k)
		}
	}
}

func hasDWARF(ef *elf.File) bool {
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_NOBITS && (s.Name == ".debug_info" || s.Name == ".zdebug_info") {
			return true
		}
	}
	return false
}

// Fetches reports whether the Symbolizer has a debug file fetcher.
func (s *Symbolizer) Fetches() bool { return s.opts.FetchDebug != nil }

// maxPrefetch bounds the modules whose debug files are looked up at once
// (the fetcher bounds its downloads itself).
const maxPrefetch = 8

// PrefetchDebug fetches, in parallel, the separate debug files that the
// modules of refs lack on disk (through Options.FetchDebug), so that the
// lookups that follow find them at once instead of fetching one module
// after another. It loads no symbols. Without a FetchDebug it does
// nothing.
func (s *Symbolizer) PrefetchDebug(refs []ModuleRef) {
	if s.opts.FetchDebug == nil {
		return
	}
	sem := make(chan struct{}, maxPrefetch)
	var wg sync.WaitGroup
	for _, ref := range refs {
		m, err := s.Module(ref)
		if err != nil || !m.wantsFetchedDebug() || m.loaded() {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_ = safely("prefetch "+m.path, func() error {
				if f := m.findLocalDebugFile(); f != nil {
					f.close()
					return nil
				}
				if s.expired() == nil {
					s.opts.FetchDebug(s.workContext(), m.buildID)
				}
				return nil
			})
		}()
	}
	wg.Wait()
}
