// Package goruntime reads a live Go program's goroutines from its runtime's
// own tables, without stopping it and without its help: runtime.allgs and
// allglen for the list, each g for its id, status, wait reason, thread and
// creator, and each parked goroutine's stack walked from its saved context
// (g.sched) with the frame sizes of the program's pclntab, read from its
// memory through runtime.firstmoduledata — so neither frame pointers nor
// DWARF are needed, and stripped, PIE and externally linked binaries work
// alike.
//
// The layout of the runtime's structures comes from the binary's DWARF when
// it has some, else from a table per Go release (layouts.go, written by
// ./gen from probes built with each toolchain). A release the table does not
// know is an error, never a guess.
//
// The package takes memory as an io.ReaderAt (process_vm_readv for a live
// process, a core file later) and the executable as an io.ReaderAt. The
// program runs while it is read: every goroutine is validated (status known,
// its saved SP inside its own stack, every PC in Go code, the g unchanged
// after its stack was read) and one that fails is counted as skipped, never
// returned half-read. Everything read is bounded. amd64 only.
package goruntime

import (
	"bytes"
	"compress/zlib"
	"debug/buildinfo"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"stackshot/internal/contain"
	"stackshot/internal/safeelf"
	"strings"
	"time"
)

// ErrNotGo says the executable carries no Go build info.
var ErrNotGo = errors.New("not a Go program")

// UnknownVersionError says the runtime layout of a Go release is not known
// (no DWARF, not in the table).
type UnknownVersionError struct{ Version string }

func (e *UnknownVersionError) Error() string {
	return fmt.Sprintf("goroutines of %s programs cannot be read: stackshot knows the runtime layout of %s only, and the binary has no usable DWARF",
		e.Version, strings.Join(sortedReleases(), ", "))
}

// Target is what a goroutine read needs.
type Target struct {
	Mem  io.ReaderAt // the program's memory (addresses as offsets)
	Exe  io.ReaderAt // its executable file
	Bias uint64      // the executable's load bias (PIE), 0 otherwise
	// Version is the Go version ("go1.26.8"); "" reads it from the
	// executable's build info.
	Version string
	// AllGs and AllGLen are the addresses (load bias applied) of
	// runtime.allgs and runtime.allglen when the caller knows them
	// (symtab finds them in stripped binaries from runtime.allgadd's
	// code); 0 looks them up in the symbol table, else scans the data.
	AllGs, AllGLen uint64
}

// Runtime is an opened Go program, ready for goroutine reads.
type Runtime struct {
	Version string
	Layout  *Layout
	// LayoutFrom says where the layout came from: "dwarf" or "table".
	LayoutFrom string
	// DWARFErr says why the binary's DWARF could not give the layout.
	DWARFErr error
	// Deadline (if set) and Cancel (if not nil) end a goroutine read
	// early, with an error.
	Deadline time.Time
	Cancel   <-chan struct{}
	mem      io.ReaderAt
	allgs    []uint64 // address of runtime.allgs (slice header), or candidates
	allglen  uint64   // address of runtime.allglen, 0 unknown
	pcln     *pcln
}

// Open identifies the program's Go version and runtime layout and finds
// the runtime's goroutine list and function table.
func Open(t Target) (rt *Runtime, err error) {
	err = contain.Do("reading the executable", func() error {
		rt, err = open(t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// openELF parses the executable's headers once safeelf has checked them
// against its size (the file is the target's: hostile).
func openELF(exe io.ReaderAt) (*elf.File, error) {
	var size int64
	switch f := exe.(type) {
	case interface{ Size() int64 }:
		size = f.Size()
	case interface{ Stat() (os.FileInfo, error) }:
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		size = st.Size()
	default:
		return nil, errors.New("the executable's size is unknown")
	}
	if _, err := safeelf.Check(exe, size); err != nil {
		return nil, err
	}
	return elf.NewFile(exe)
}

func open(t Target) (rt *Runtime, err error) {
	ef, err := openELF(t.Exe)
	if err != nil {
		return nil, err
	}
	if ef.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("goroutines are read on amd64 only, not %v", ef.Machine)
	}
	version := t.Version
	if version == "" {
		bi, err := buildinfo.Read(t.Exe)
		if err != nil {
			return nil, ErrNotGo
		}
		version = bi.GoVersion
	}
	rt = &Runtime{Version: version, mem: t.Mem}
	syms := runtimeSymbols(ef, t.Bias)
	if err := rt.layout(ef, syms); err != nil {
		return nil, err
	}
	md := syms["runtime.firstmoduledata"].addr
	if md == 0 {
		if md, err = findModuledata(t.Mem, ef, t.Bias, rt.Layout); err != nil {
			return nil, err
		}
	}
	if rt.pcln, err = newPcln(t.Mem, rt.Layout, md); err != nil {
		return nil, err
	}
	if t.AllGs != 0 && t.AllGLen != 0 {
		rt.allgs, rt.allglen = []uint64{t.AllGs}, t.AllGLen
	} else if a, n := syms["runtime.allgs"].addr, syms["runtime.allglen"].addr; a != 0 && n != 0 {
		rt.allgs, rt.allglen = []uint64{a}, n
	} else if rt.allgs, err = rt.findAllgs(md); err != nil {
		return nil, err
	}
	return rt, nil
}

// layout picks the runtime layout: DWARF's offsets when the binary has
// DWARF, else the table's; the status and wait-reason words from the
// program's own string tables when its symbols locate them, else the
// table's.
func (rt *Runtime) layout(ef *elf.File, syms map[string]symbol) error {
	known, inTable := KnownLayout(rt.Version)
	var l *Layout
	if hasDWARF(ef) {
		d, err := typesDWARF(ef)
		if err == nil {
			var dl *Layout
			if dl, err = LayoutFromDWARF(d); err == nil {
				l, rt.LayoutFrom = dl, "dwarf"
			}
		}
		rt.DWARFErr = err
	}
	if l == nil {
		if !inTable {
			return &UnknownVersionError{Version: rt.Version}
		}
		l, rt.LayoutFrom = known, "table"
	} else {
		l.Release = Release(rt.Version)
		if inTable {
			l.Statuses, l.WaitReasons, l.FuncIDWrapper = known.Statuses, known.WaitReasons, known.FuncIDWrapper
		}
	}
	if s, ok := readStrings(rt.mem, syms["runtime.gStatusStrings"]); ok {
		l.Statuses = s
	}
	if s, ok := readStrings(rt.mem, syms["runtime.waitReasonStrings"]); ok {
		l.WaitReasons = s
	}
	if len(l.Statuses) == 0 {
		return &UnknownVersionError{Version: rt.Version}
	}
	if err := l.check(); err != nil {
		return err
	}
	rt.Layout = l
	return nil
}

// typesDWARF opens only what the runtime's types need of a binary's
// DWARF (.debug_info, .debug_abbrev, the strings and addresses), not its
// line tables.
func typesDWARF(ef *elf.File) (*dwarf.Data, error) {
	var secs [3][]byte
	for i, n := range []string{"abbrev", "info", "str"} {
		s := ef.Section(".debug_" + n)
		if s == nil {
			s = ef.Section(".zdebug_" + n)
		}
		if s == nil || s.Type == elf.SHT_NOBITS {
			if n == "str" {
				continue
			}
			return nil, fmt.Errorf("no .debug_%s", n)
		}
		b, err := s.Data()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(s.Name, ".zdebug_") {
			if b, err = zdebug(b); err != nil {
				return nil, err
			}
		}
		secs[i] = b
	}
	d, err := dwarf.New(secs[0], nil, nil, secs[1], nil, nil, nil, secs[2])
	if err != nil {
		return nil, err
	}
	// DWARF 5 forms (Go 1.25+) index these.
	for _, n := range []string{".debug_addr", ".debug_str_offsets", ".debug_line_str"} {
		s := ef.Section(n)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		b, err := s.Data()
		if err != nil {
			return nil, err
		}
		if err := d.AddSection(n, b); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// maxDebugSection bounds a decompressed .zdebug section.
const maxDebugSection = 1 << 28

// zdebug decompresses an old-style .zdebug section ("ZLIB", 8-byte
// big-endian size, zlib stream).
func zdebug(b []byte) ([]byte, error) {
	if len(b) < 12 || string(b[:4]) != "ZLIB" {
		return nil, fmt.Errorf("bad .zdebug header")
	}
	n := binary.BigEndian.Uint64(b[4:])
	if n > maxDebugSection {
		return nil, fmt.Errorf(".zdebug section of %d bytes", n)
	}
	zr, err := zlib.NewReader(bytes.NewReader(b[12:]))
	if err != nil {
		return nil, err
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, err
	}
	return out, nil
}

func hasDWARF(ef *elf.File) bool {
	for _, n := range []string{".debug_info", ".zdebug_info"} {
		if s := ef.Section(n); s != nil && s.Type != elf.SHT_NOBITS {
			return true
		}
	}
	return false
}

type symbol struct{ addr, size uint64 }

// runtimeSymbols returns the addresses (load bias applied) of the runtime
// variables read here, from the ELF symbol table when there is one.
func runtimeSymbols(ef *elf.File, bias uint64) map[string]symbol {
	want := map[string]symbol{"runtime.allgs": {}, "runtime.allglen": {}, "runtime.firstmoduledata": {},
		"runtime.gStatusStrings": {}, "runtime.waitReasonStrings": {}}
	syms, err := ef.Symbols()
	if err != nil {
		return want
	}
	for _, s := range syms {
		if _, ok := want[s.Name]; ok && s.Value != 0 && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
			want[s.Name] = symbol{s.Value + bias, s.Size}
		}
	}
	return want
}

// maxStrings bounds a runtime string table read from memory.
const maxStrings = 256

// readStrings reads a [N]string array of the program.
func readStrings(mem io.ReaderAt, s symbol) ([]string, bool) {
	if s.addr == 0 || s.size == 0 || s.size%16 != 0 || s.size/16 > maxStrings {
		return nil, false
	}
	raw := make([]byte, s.size)
	if readFull(mem, raw, s.addr) != nil {
		return nil, false
	}
	out := make([]string, s.size/16)
	for i := range out {
		p, n := le64(raw[16*i:]), le64(raw[16*i+8:])
		if n == 0 {
			continue
		}
		if n > 128 {
			return nil, false
		}
		b := make([]byte, n)
		if readFull(mem, b, p) != nil {
			return nil, false
		}
		out[i] = string(b)
	}
	return out, true
}

func sortedReleases() []string {
	rs := Releases()
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && releaseNum(rs[j]) < releaseNum(rs[j-1]); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
	return rs
}

func releaseNum(r string) int {
	n := 0
	for _, c := range strings.TrimPrefix(r, "go1.") {
		n = n*10 + int(c-'0')
	}
	return n
}
