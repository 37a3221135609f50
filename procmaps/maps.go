// Package procmaps reads what /proc says about a process: its memory
// mappings (/proc/PID/maps), its threads (/proc/PID/task), and each thread's
// name, state, system call and kernel stack.
//
// Everything here is target-controlled text: parsers bound their input and
// never panic; paths are kept as the target sees them.
package procmaps

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Kind classifies a mapping.
type Kind uint8

const (
	KindAnon      Kind = iota // no backing file
	KindFile                  // a regular file
	KindStack                 // [stack] (the main thread's stack)
	KindHeap                  // [heap]
	KindVDSO                  // [vdso]
	KindVVar                  // [vvar] and friends
	KindVsyscall              // [vsyscall]
	KindNamedAnon             // [anon:NAME] (prctl PR_SET_VMA_ANON_NAME)
	KindMemfd                 // /memfd:NAME
	KindOther                 // any other [pseudo] name
)

var kindNames = [...]string{"anon", "file", "stack", "heap", "vdso", "vvar", "vsyscall", "named-anon", "memfd", "other"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64
	Perms      string // "r-xp"
	Offset     uint64
	DevMajor   uint32
	DevMinor   uint32
	Inode      uint64
	Path       string // as the target sees it, " (deleted)" trimmed
	Deleted    bool
	Kind       Kind
}

// Readable, Writable and Executable decode Perms.
func (m *Mapping) Readable() bool   { return len(m.Perms) > 0 && m.Perms[0] == 'r' }
func (m *Mapping) Writable() bool   { return len(m.Perms) > 1 && m.Perms[1] == 'w' }
func (m *Mapping) Executable() bool { return len(m.Perms) > 2 && m.Perms[2] == 'x' }

// Dev is the mapped file's device number in Linux's encoding (glibc's
// makedev, unix.Mkdev on Linux), whatever the host: a saved capture is
// read on any OS.
func (m *Mapping) Dev() uint64 {
	dev := (uint64(m.DevMajor) & 0x00000fff) << 8
	dev |= (uint64(m.DevMajor) & 0xfffff000) << 32
	dev |= (uint64(m.DevMinor) & 0x000000ff) << 0
	dev |= (uint64(m.DevMinor) & 0xffffff00) << 12
	return dev
}

// Contains reports whether addr lies in the mapping.
func (m *Mapping) Contains(addr uint64) bool { return addr >= m.Start && addr < m.End }

// MaxMapsLine bounds a single maps line (PATH_MAX plus the fixed fields).
const MaxMapsLine = 4096 + 256

// MaxMappings bounds how many mappings are read.
const MaxMappings = 1 << 20

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("malformed maps line")

// ParseMaps parses the text of /proc/PID/maps.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), MaxMapsLine)
	var out []Mapping
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := ParseLine(line)
		if err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		if len(out) >= MaxMappings {
			return out, fmt.Errorf("more than %d mappings: %w", MaxMappings, ErrFormat)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return out, err // names the file already; callers say what they were doing
	}
	return out, nil
}

// ParseLine parses one maps line:
//
//	START-END PERMS OFFSET MAJ:MIN INODE   PATH
//
// PATH may contain spaces and ends the line; it may be absent.
func ParseLine(line []byte) (Mapping, error) {
	var m Mapping
	rest := line
	field := func() []byte {
		rest = bytes.TrimLeft(rest, " \t")
		i := bytes.IndexAny(rest, " \t")
		if i < 0 {
			f := rest
			rest = nil
			return f
		}
		f := rest[:i]
		rest = rest[i:]
		return f
	}
	rng := field()
	dash := bytes.IndexByte(rng, '-')
	if dash < 0 {
		return m, fmt.Errorf("address range %q: %w", trunc(rng), ErrFormat)
	}
	var err error
	if m.Start, err = parseHex(rng[:dash]); err != nil {
		return m, err
	}
	if m.End, err = parseHex(rng[dash+1:]); err != nil {
		return m, err
	}
	if m.End < m.Start {
		return m, fmt.Errorf("range %q ends before it starts: %w", trunc(rng), ErrFormat)
	}
	perms := field()
	if len(perms) != 4 {
		return m, fmt.Errorf("permissions %q: %w", trunc(perms), ErrFormat)
	}
	m.Perms = string(perms)
	if m.Offset, err = parseHex(field()); err != nil {
		return m, err
	}
	dev := field()
	colon := bytes.IndexByte(dev, ':')
	if colon < 0 {
		return m, fmt.Errorf("device %q: %w", trunc(dev), ErrFormat)
	}
	maj, err := parseHex(dev[:colon])
	if err != nil || maj > 0xffffffff {
		return m, fmt.Errorf("device %q: %w", trunc(dev), ErrFormat)
	}
	min, err := parseHex(dev[colon+1:])
	if err != nil || min > 0xffffffff {
		return m, fmt.Errorf("device %q: %w", trunc(dev), ErrFormat)
	}
	m.DevMajor, m.DevMinor = uint32(maj), uint32(min)
	ino := field()
	if m.Inode, err = strconv.ParseUint(string(ino), 10, 64); err != nil {
		return m, fmt.Errorf("inode %q: %w", trunc(ino), ErrFormat)
	}
	// The path is the rest of the line after the padding; it keeps inner
	// and trailing spaces except the padding before it.
	p := string(bytes.TrimLeft(rest, " \t"))
	if strings.HasSuffix(p, " (deleted)") {
		p = strings.TrimSuffix(p, " (deleted)")
		m.Deleted = true
	}
	m.Path = p
	m.Kind = classify(p, m.Inode)
	return m, nil
}

func classify(p string, inode uint64) Kind {
	switch {
	case p == "":
		return KindAnon
	case p == "[stack]" || strings.HasPrefix(p, "[stack:"):
		return KindStack
	case p == "[heap]":
		return KindHeap
	case p == "[vdso]":
		return KindVDSO
	case p == "[vvar]" || p == "[vvar_vclock]":
		return KindVVar
	case p == "[vsyscall]":
		return KindVsyscall
	case strings.HasPrefix(p, "[anon:") || strings.HasPrefix(p, "[anon_shmem:"):
		return KindNamedAnon
	case strings.HasPrefix(p, "/memfd:"):
		return KindMemfd
	case strings.HasPrefix(p, "["):
		return KindOther
	case strings.HasPrefix(p, "/") && inode != 0:
		return KindFile
	case strings.HasPrefix(p, "/"):
		return KindOther // e.g. /dev/zero (deleted), SYSV shared memory
	}
	return KindOther
}

func parseHex(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 16 {
		return 0, fmt.Errorf("hex field %q: %w", trunc(b), ErrFormat)
	}
	v, err := strconv.ParseUint(string(b), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("hex field %q: %w", trunc(b), ErrFormat)
	}
	return v, nil
}

func trunc(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// Maps is a parsed address space, sorted by start address.
type Maps []Mapping

// Find returns the mapping containing addr.
func (ms Maps) Find(addr uint64) (*Mapping, bool) {
	lo, hi := 0, len(ms)
	for lo < hi {
		mid := (lo + hi) / 2
		if ms[mid].End <= addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(ms) && ms[lo].Contains(addr) {
		return &ms[lo], true
	}
	return nil, false
}

// FirstOfFile returns the lowest mapping of the same file (same dev, inode
// and path) as m: where its ELF header is mapped.
func (ms Maps) FirstOfFile(m *Mapping) *Mapping {
	for i := range ms {
		o := &ms[i]
		if o.Inode == m.Inode && o.DevMajor == m.DevMajor && o.DevMinor == m.DevMinor && o.Path == m.Path {
			return o
		}
	}
	return m
}
