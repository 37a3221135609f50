// Package pyruntime reads a CPython process's threads' Python frames from
// its memory, without stopping it and without its help: _PyRuntime →
// interpreters (subinterpreters too) → thread states → frames, each frame's
// code object for its name, file and line. CPython 3.8 to 3.13.
//
// The interpreter is found in the executable or in libpython3.X.so by its
// exported symbols (_PyRuntime, and the type objects every object read is
// checked against); the release by Py_Version (3.11+) or the version
// string in the binary. The layout of the structures comes from a table
// per minor release (layouts.go, written by ./gen from each release's
// headers); a release the table does not know is an error, never a guess.
//
// The package takes memory as an io.ReaderAt (process_vm_readv for a live
// process) and the module's file as an io.ReaderAt; it knows nothing of
// ptrace or of sandboxes. Everything the target controls is hostile: every
// object is checked against its type, every chain bounded (frames per
// thread, threads, interpreters, string and table lengths) and checked for
// cycles. A thread whose frames do not check out is returned with an
// error, never half-read. amd64 only.
package pyruntime

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"stackshot/internal/contain"
	"stackshot/internal/safeelf"
)

// ErrNotPython says the module holds no CPython interpreter.
var ErrNotPython = errors.New("no CPython interpreter")

// UnknownVersionError says the layout of a CPython release is not known.
type UnknownVersionError struct{ Version string }

func (e *UnknownVersionError) Error() string {
	return fmt.Sprintf("Python frames of CPython %s cannot be read: stackshot knows the layouts of CPython %s only",
		e.Version, strings.Join(knownMinors(), ", "))
}

// Module is a mapped file that may hold the interpreter: the executable,
// or a libpython3.X.so.
type Module struct {
	Path string      // as the target sees it
	File io.ReaderAt // its contents
	Size int64
	Bias uint64 // its load bias
}

// Runtime is an opened CPython interpreter, ready for reads.
type Runtime struct {
	Version string // "3.11.2"
	Layout  *Layout
	// Described: Layout is the runtime's own account of its structures
	// (3.13's _Py_DebugOffsets), not only the generated table.
	Described bool
	Mem       io.ReaderAt
	// addresses, load bias applied
	runtime                    uint64 // _PyRuntime
	codeType, strType, bytType uint64 // PyCode_Type, PyUnicode_Type, PyBytes_Type
	// PyModule_Type, PyDict_Type, PyLong_Type: for the threads' names
	// only (0: not found, and no names are read)
	modType, dictType, longType uint64
}

// Open finds the interpreter in one of mods (the executable first) and
// its release. ErrNotPython: none has it.
func Open(mem io.ReaderAt, mods []Module) (*Runtime, error) {
	for _, m := range mods {
		var rt *Runtime
		err := contain.Do("reading "+m.Path, func() error {
			var err error
			rt, err = open(mem, m)
			return err
		})
		if errors.Is(err, ErrNotPython) {
			continue
		}
		return rt, err
	}
	return nil, ErrNotPython
}

// symbolNames are the symbols Open looks up.
// Those after the first five are needed for the threads' names only.
var symbolNames = []string{"_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type",
	"PyModule_Type", "PyDict_Type", "PyLong_Type"}

func open(mem io.ReaderAt, m Module) (*Runtime, error) {
	if _, err := safeelf.Check(m.File, m.Size); err != nil {
		return nil, ErrNotPython
	}
	ef, err := elf.NewFile(m.File)
	if err != nil {
		return nil, ErrNotPython
	}
	syms := map[string]uint64{}
	for _, read := range []func() ([]elf.Symbol, error){ef.DynamicSymbols, ef.Symbols} {
		list, _ := read()
		for _, s := range list {
			for _, n := range symbolNames {
				if s.Name == n && s.Value != 0 && syms[n] == 0 {
					syms[n] = s.Value + m.Bias
				}
			}
		}
	}
	if syms["_PyRuntime"] == 0 {
		return nil, ErrNotPython
	}
	if ef.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("Python frames are read on amd64 only, not %v", ef.Machine)
	}
	for _, n := range symbolNames[2:5] {
		if syms[n] == 0 {
			return nil, fmt.Errorf("%s has _PyRuntime but no %s symbol", m.Path, n)
		}
	}
	version, err := findVersion(mem, ef, m, syms["Py_Version"])
	if err != nil {
		return nil, err
	}
	minor := 0
	if parts := strings.Split(version, "."); len(parts) >= 2 && parts[0] == "3" {
		minor, _ = strconv.Atoi(parts[1])
	}
	l := layoutFor(minor)
	if l == nil {
		return nil, &UnknownVersionError{Version: version}
	}
	l, described, err := selfDescribed(mem, syms["_PyRuntime"], syms["Py_Version"], l)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", m.Path, err)
	}
	return &Runtime{Version: version, Layout: l, Described: described, Mem: mem, runtime: syms["_PyRuntime"],
		codeType: syms["PyCode_Type"], strType: syms["PyUnicode_Type"], bytType: syms["PyBytes_Type"],
		modType: syms["PyModule_Type"], dictType: syms["PyDict_Type"], longType: syms["PyLong_Type"]}, nil
}

// findVersion reads the release: Py_Version (3.11+: PY_VERSION_HEX in the
// target's memory), else the version string in the module's read-only
// data whose minor release the module's name gives (libpython3.8.so,
// python3.8).
func findVersion(mem io.ReaderAt, ef *elf.File, m Module, pyVersion uint64) (string, error) {
	if pyVersion != 0 {
		var b [4]byte
		if _, err := mem.ReadAt(b[:], int64(pyVersion)); err != nil {
			return "", fmt.Errorf("reading Py_Version: %v", err)
		}
		return hexVersion(binary.LittleEndian.Uint32(b[:])), nil
	}
	minor := moduleMinor.FindStringSubmatch(m.Path[strings.LastIndexByte(m.Path, '/')+1:])
	if minor == nil {
		return "", fmt.Errorf("%s has _PyRuntime, but neither Py_Version nor a name saying its release", m.Path)
	}
	s := ef.Section(".rodata")
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size > 64<<20 {
		return "", fmt.Errorf("%s has no .rodata to read its release from", m.Path)
	}
	data, err := safeelf.SectionDataAt(nil, m.File, s, m.Size, nil)
	if err != nil {
		return "", fmt.Errorf("reading %s's .rodata: %v", m.Path, err)
	}
	re := regexp.MustCompile(`(?:^|[^0-9.])(3\.` + minor[1] + `\.[0-9]+(?:(?:a|b|rc)[0-9]+)?\+?)\x00`)
	if v := re.FindSubmatch(data); v != nil {
		return string(v[1]), nil
	}
	return "", fmt.Errorf("%s has no version string of CPython 3.%s", m.Path, minor[1])
}

var moduleMinor = regexp.MustCompile(`^(?:lib)?python3\.([0-9]+)`)

// hexVersion spells PY_VERSION_HEX as the release does: 0x030B02F0 is
// "3.11.2", 0x030D00C1 "3.13.0rc1".
func hexVersion(v uint32) string {
	s := fmt.Sprintf("%d.%d.%d", v>>24, v>>16&0xff, v>>8&0xff)
	switch level, serial := v>>4&0xf, v&0xf; level {
	case 0xa:
		s += fmt.Sprintf("a%d", serial)
	case 0xb:
		s += fmt.Sprintf("b%d", serial)
	case 0xc:
		s += fmt.Sprintf("rc%d", serial)
	}
	return s
}

func itoa(i int) string { return strconv.Itoa(i) }
