package symtab

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"stackshot/internal/contain"
	"stackshot/internal/diskcache"
	"stackshot/internal/safeelf"
)

// Limits on sizes taken from files.
const (
	maxNoteBytes    = 64 << 10 // one PT_NOTE / SHT_NOTE read
	maxBuildIDBytes = 512      // a build id descriptor
	maxSymbols      = 1 << 24  // symbols kept from one table
)

// Sections are read into memory within a budget (safeelf.Budget): at most
// Options.MaxSectionBytes per section and Options.MaxDebugBytes in total
// per Symbolizer, charged before the allocation.

// openFile is one opened (or in-memory) ELF object.
type openFile struct {
	name     string // path (inside root, when root is set)
	root     string // the target's root it was opened in, or ""
	r        io.ReaderAt
	sf       *safeelf.File // r with its parsed headers (what ELF hands on), or nil
	closer   io.Closer
	size     int64
	ef       *elf.File
	dev, ino uint64
	ctime    int64 // status change time (ns), part of a cache key
	// putSections: decompressed sections are written to the cache. Only
	// when a run needs them although the file's DWARF index was cached (a
	// recurring need): a first run writes the small decoded tables, not
	// megabytes of sections it may never read again.
	putSections atomic.Bool
	buildID     string
	mismatch    bool // found, but another build id or inode than the mapping's
	sym         *Symbolizer
}

func (f *openFile) close() {
	if f.closer != nil {
		f.closer.Close()
		f.closer = nil
	}
}

func bytesReaderAt(b []byte) io.ReaderAt { return bytes.NewReader(b) }

// safely runs fn, turning a panic (debug/elf, debug/dwarf and debug/gosym
// are not hardened against malformed input) into an error.
func safely(what string, fn func() error) error { return contain.Do(what, fn) }

// parseFile checks and parses the ELF headers of r and reads its build id.
func (s *Symbolizer) parseFile(r io.ReaderAt, size int64, name string) (*openFile, error) {
	if err := s.expired(); err != nil {
		return nil, fmt.Errorf("open elf %s: %w", name, err)
	}
	sf, err := safeelf.Open(r, size, s.budget)
	if err != nil {
		return nil, fmt.Errorf("open elf %s: %w", name, err)
	}
	f := &openFile{name: name, r: r, sf: sf, size: size, ef: sf.File, sym: s}
	if id, err := elfBuildID(f.ef, size); err == nil {
		f.buildID = id
	}
	return f, nil
}

// data reads a section of f within the Symbolizer's budget and deadline.
func (f *openFile) data(s *elf.Section) ([]byte, error) {
	return f.dataProgress(s, nil)
}

// dataProgress is data calling progress as the section is decompressed
// (safeelf.SectionDataProgress).
func (f *openFile) dataProgress(s *elf.Section, progress func([]byte, int)) ([]byte, error) {
	if f.sym == nil {
		return sectionData(s, f.size)
	}
	key, cached := f.cacheKey(s)
	if cached {
		if b, ok := f.cachedSection(key, s); ok {
			return b, nil
		}
	}
	b, err := safeelf.SectionDataProgress(f.sym.opts.Context, f.r, s, f.size, f.sym.budget, progress)
	if err == nil && cached && f.putSections.Load() && uint64(len(b)) == s.Size {
		f.sym.opts.Cache.Put(key, b) // best effort: a failed write is a miss next time
	}
	if errors.Is(err, safeelf.ErrNoData) {
		return nil, ErrNoSymbols
	}
	if err != nil {
		f.sym.noteLimit(err)
		return nil, fmt.Errorf("read %s: %w", s.Name, err)
	}
	return b, nil
}

// cacheKey is the cache key of section s of f, and whether s is worth
// caching: a compressed section (decompressing is the cost; a plain one
// is read as fast from the file) of a file with a build id and a known
// identity on disk.
func (f *openFile) cacheKey(s *elf.Section) (diskcache.Key, bool) {
	if f.sym.opts.Cache == nil || s.Flags&elf.SHF_COMPRESSED == 0 || s.Type == elf.SHT_NOBITS ||
		f.buildID == "" || f.ino == 0 {
		return diskcache.Key{}, false
	}
	return diskcache.Key{Kind: "section", BuildID: f.buildID, Size: f.size, Dev: f.dev, Ino: f.ino,
		Ctime: f.ctime, Part: fmt.Sprintf("%s@%d+%d", s.Name, s.Offset, s.FileSize)}, true
}

// cacheGet is the cache's entry for k, within the per-section cap and
// charged to the budget (a module's cached tables are bounded as its
// sections would be).
func (s *Symbolizer) cacheGet(k diskcache.Key) ([]byte, bool) {
	b, ok := s.opts.Cache.Get(k, s.budget.SectionCap())
	if !ok || s.budget.Take(int64(len(b))) != nil {
		return nil, false
	}
	return b, true
}

// cachedSection is section s decompressed, from the cache: exactly the
// size the section header declares, within the per-section cap, charged
// to the budget before it is read. The bytes are as hostile as the file's
// and are parsed as such.
func (f *openFile) cachedSection(key diskcache.Key, s *elf.Section) ([]byte, bool) {
	b := f.sym.budget
	if s.Size == 0 || s.Size > uint64(b.SectionCap()) || b.Take(int64(s.Size)) != nil {
		return nil, false
	}
	data, ok := f.sym.opts.Cache.Get(key, int64(s.Size))
	if !ok || uint64(len(data)) != s.Size {
		b.Give(int64(s.Size))
		return nil, false
	}
	return data, true
}

// elfBuildID returns the hex GNU build id of ef: from the
// .note.gnu.build-id section, else from any SHT_NOTE section, else from the
// PT_NOTE segments.
func elfBuildID(ef *elf.File, size int64) (id string, err error) {
	err = ErrNoBuildID
	perr := safely("build id", func() error {
		order := ef.ByteOrder
		try := func(r io.ReaderAt, off, n uint64) bool {
			if n == 0 || n > maxNoteBytes || off > uint64(size) || n > uint64(size)-off {
				return false
			}
			buf := make([]byte, n)
			if _, e := r.ReadAt(buf, int64(off)); e != nil && e != io.EOF {
				return false
			}
			if s, ok := parseBuildIDNotes(buf, order); ok {
				id, err = s, nil
				return true
			}
			return false
		}
		var notes []*elf.Section
		for _, s := range ef.Sections {
			if s.Type != elf.SHT_NOTE {
				continue
			}
			if s.Name == ".note.gnu.build-id" {
				notes = append([]*elf.Section{s}, notes...)
			} else {
				notes = append(notes, s)
			}
		}
		for _, s := range notes {
			if s.Flags&elf.SHF_COMPRESSED != 0 {
				continue
			}
			if try(s.ReaderAt, 0, s.Size) {
				return nil
			}
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_NOTE && try(p.ReaderAt, 0, p.Filesz) {
				return nil
			}
		}
		return nil
	})
	if perr != nil {
		return "", perr
	}
	return id, err
}

// parseBuildIDNotes walks a buffer of ELF notes and returns the GNU build
// id (NT_GNU_BUILD_ID) in hex.
func parseBuildIDNotes(b []byte, order binary.ByteOrder) (string, bool) {
	for i := 0; len(b) >= 12 && i < 1024; i++ {
		namesz := uint64(order.Uint32(b[0:]))
		descsz := uint64(order.Uint32(b[4:]))
		typ := order.Uint32(b[8:])
		b = b[12:]
		nameEnd := align4(namesz)
		if nameEnd > uint64(len(b)) {
			return "", false
		}
		name := b[:namesz]
		b = b[nameEnd:]
		descEnd := align4(descsz)
		if descEnd > uint64(len(b)) {
			if descsz > uint64(len(b)) {
				return "", false
			}
			descEnd = uint64(len(b))
		}
		desc := b[:descsz]
		b = b[descEnd:]
		if typ == ntGNUBuildID && string(name) == "GNU\x00" && descsz > 0 && descsz <= maxBuildIDBytes {
			return hex.EncodeToString(desc), true
		}
	}
	return "", false
}

// ntGNUBuildID is NT_GNU_BUILD_ID.
const ntGNUBuildID = 3

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// loadSeg is one PT_LOAD segment.
type loadSeg struct {
	off, filesz, vaddr, memsz uint64
}

func elfLoads(ef *elf.File) []loadSeg {
	var l []loadSeg
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			l = append(l, loadSeg{p.Off, p.Filesz, p.Vaddr, p.Memsz})
		}
	}
	return l
}

const pageSize = 4096

// offsetToVaddr maps a file offset to a virtual address through the PT_LOAD
// segment whose file bytes contain it. An offset in the page-aligned slack
// before a segment's first byte (mapped by the same mmap) maps through that
// segment too when no segment contains it exactly.
func offsetToVaddr(loads []loadSeg, off uint64) (uint64, bool) {
	for _, l := range loads {
		if off >= l.off && off-l.off < l.filesz {
			return l.vaddr + (off - l.off), true
		}
	}
	for _, l := range loads {
		start := l.off &^ (pageSize - 1)
		if off >= start && off < l.off+l.filesz {
			return l.vaddr - (l.off - off), true
		}
	}
	return 0, false
}

// newModule builds a Module around an opened file.
func newModule(s *Symbolizer, path string, f *openFile) (*Module, error) {
	if f.ef == nil {
		return nil, fmt.Errorf("open elf %s: %w", path, ErrNoSymbols)
	}
	m := &Module{
		sym:     s,
		path:    path,
		buildID: f.buildID,
		file:    f,
		loads:   elfLoads(f.ef),
	}
	return m, nil
}

// sectionData reads a section (decompressing it if needed), bounded by
// the default per-section cap but outside any Symbolizer's budget: prefer
// openFile.data.
func sectionData(s *elf.Section, fileSize int64) ([]byte, error) {
	b, err := safeelf.SectionData(nil, s, fileSize, nil)
	if errors.Is(err, safeelf.ErrNoData) {
		return nil, ErrNoSymbols
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Name, err)
	}
	return b, nil
}

// mappingBias returns the load bias of a mapping of the file: the loader
// maps each PT_LOAD at the page-aligned start of its file bytes, so the
// segment whose aligned offset equals the mapping's offset (and, among
// several such, whose aligned extent has the mapping's length) is the one
// mapped; bias = start - aligned vaddr.
func mappingBias(loads []loadSeg, start, end, offset uint64) (uint64, bool) {
	best, bestExact := -1, false
	for i, l := range loads {
		if l.off&^(pageSize-1) != offset {
			continue
		}
		vlo := l.vaddr &^ (pageSize - 1)
		vhi := (l.vaddr + l.memsz + pageSize - 1) &^ (pageSize - 1)
		exact := vhi-vlo == end-start
		if best < 0 || (exact && !bestExact) {
			best, bestExact = i, exact
		}
	}
	if best >= 0 {
		return start - loads[best].vaddr&^(pageSize-1), true
	}
	if v, ok := offsetToVaddr(loads, offset); ok {
		return start - v, true
	}
	return 0, false
}
