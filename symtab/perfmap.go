package symtab

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// Limits on perf maps and kallsyms.
const (
	maxPerfMapBytes = 256 << 20
	maxPerfMapLine  = 64 << 10
	maxTextSyms     = 1 << 23
)

// PerfMap is a JIT symbol map (/tmp/perf-PID.map): lines of
// "START SIZE NAME", START and SIZE in hex.
type PerfMap struct {
	start, end []uint64
	name       []string
}

// LoadPerfMap parses a perf map file (a regular file, opened non-blocking).
func LoadPerfMap(path string) (*PerfMap, error) {
	f, err := openPlain(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParsePerfMap(io.LimitReader(f, maxPerfMapBytes))
}

// ParsePerfMap parses the text of a perf map. Malformed lines are skipped;
// when entries overlap the later one wins (a JIT reuses freed code).
func ParsePerfMap(r io.Reader) (*PerfMap, error) {
	text, err := readPerfMapText(r, 0)
	if err != nil {
		return nil, err
	}
	return parsePerfMapText(context.Background(), text)
}

// readPerfMapText reads at most maxPerfMapBytes of a perf map's text
// into one buffer, sized for size bytes (when known): its names are kept
// as views of it, not a string each.
func readPerfMapText(r io.Reader, size int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(max(size, 0), maxPerfMapBytes)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(r, maxPerfMapBytes)); err != nil {
		return nil, fmt.Errorf("read perf map: %w", err)
	}
	return buf.Bytes(), nil
}

// perfMapLines bounds the entries text can hold (one a line).
func perfMapLines(text []byte) int { return bytes.Count(text, []byte{'\n'}) + 1 }

// perfEntryBytes is what an entry costs while parsing and once kept (its
// name is a view of the text): start, end and name's header.
const perfEntryBytes = 32

// parsePerfMapText parses a perf map's text, which it keeps (the names
// are views of it; it must not change afterwards). Entries beyond
// maxTextSyms are ignored; ctx ends the parse early (its error).
func parsePerfMapText(ctx context.Context, text []byte) (*PerfMap, error) {
	type ent struct {
		start, end uint64
		name       string
	}
	all := unsafe.String(unsafe.SliceData(text), len(text))
	ents := make([]ent, 0, min(perfMapLines(text), maxTextSyms))
	for n := 0; len(all) > 0 && len(ents) < maxTextSyms; n++ {
		if n%(1<<16) == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		line, rest, _ := strings.Cut(all, "\n")
		all = rest
		if len(line) > maxPerfMapLine {
			continue
		}
		a, rest, ok := strings.Cut(strings.TrimLeft(line, " \t"), " ")
		if !ok {
			continue
		}
		b, name, ok := strings.Cut(strings.TrimLeft(rest, " "), " ")
		if !ok {
			continue
		}
		start, err1 := parseHex(a)
		size, err2 := parseHex(b)
		if err1 != nil || err2 != nil || size == 0 || start+size < start {
			continue
		}
		ents = append(ents, ent{start, start + size, strings.TrimRight(name, "\r")})
	}
	if len(ents) == 0 {
		return nil, ErrNoSymbols
	}
	// Sort by start, stably: of entries with the same start the latest
	// wins.
	slices.SortStableFunc(ents, func(x, y ent) int { return cmp.Compare(x.start, y.start) })
	keep := 0
	for i := range ents {
		if i+1 < len(ents) && ents[i+1].start == ents[i].start {
			continue
		}
		ents[keep] = ents[i]
		keep++
	}
	p := &PerfMap{start: make([]uint64, keep), end: make([]uint64, keep), name: make([]string, keep)}
	for i, e := range ents[:keep] {
		p.start[i], p.end[i], p.name[i] = e.start, e.end, e.name
	}
	return p, nil
}

func parseHex(s string) (uint64, error) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	return strconv.ParseUint(s, 16, 64)
}

// Lookup returns the JIT symbol containing addr.
func (p *PerfMap) Lookup(addr uint64) (name string, off uint64, ok bool) {
	if p == nil {
		return "", 0, false
	}
	i := sort.Search(len(p.start), func(i int) bool { return p.start[i] > addr }) - 1
	for k := 0; i >= 0 && k < 8; i, k = i-1, k+1 {
		if addr < p.end[i] {
			return p.name[i], addr - p.start[i], true
		}
	}
	return "", 0, false
}

// Len is the number of entries.
func (p *PerfMap) Len() int {
	if p == nil {
		return 0
	}
	return len(p.start)
}

type perfMapEntry struct {
	charge  int64 // held in the budget for pm
	pm      *PerfMap
	size    int64
	mtime   time.Time
	checked time.Time
}

// perfMapRecheck is how often a cached perf map is checked for changes.
const perfMapRecheck = 100 * time.Millisecond

// PerfMapFor returns the perf map of process pid: /tmp/perf-PID.map
// inside root, the target's "/proc/PID/root". A JIT in a PID namespace
// names the file with its own pid, so the innermost pid from
// /proc/PID/status (NSpid) is tried too.
//
// The file is hostile input: it is opened inside the target's root
// (openat2, no symlink as last component, see openIn), must be a regular
// file, and must belong to the target's user (real or effective uid) or to
// root; any other owner (another user planting a map for root's JIT) is
// ignored.
//
// With root "" (a saved capture) the analysing host's /tmp says nothing
// about the target: only Options.PerfMap is used, when given.
//
// Maps are cached and reloaded when the file's size or mtime changes. It
// returns nil when there is no usable map.
func (s *Symbolizer) PerfMapFor(pid int, root string) *PerfMap {
	if root == "" {
		s.perfMu.Lock()
		pm := s.carried[pid]
		s.perfMu.Unlock()
		if pm != nil {
			return pm
		}
		if s.opts.PerfMap == "" {
			return nil
		}
		op, p := s.opener(), s.opts.PerfMap
		return s.perfMapAt("\x00"+p, func() (*os.File, error) { return op.Open("", p, true) })
	}
	op := s.opener()
	return s.perfMapAt(fmt.Sprintf("%s\x00%d", root, pid), func() (*os.File, error) { return op.OpenPerfMap(pid, root) })
}

// AddPerfMap gives the perf map a saved capture carries for process pid:
// offline lookups (root "") of that pid use it before Options.PerfMap.
// Parse it with ParsePerfMap, which bounds what it reads.
func (s *Symbolizer) AddPerfMap(pid int, pm *PerfMap) {
	s.perfMu.Lock()
	if s.carried == nil {
		s.carried = map[int]*PerfMap{}
	}
	s.carried[pid] = pm
	s.perfMu.Unlock()
}

// perfMapAt loads the perf map open opens, cached under key.
func (s *Symbolizer) perfMapAt(key string, open func() (*os.File, error)) *PerfMap {
	now := time.Now()
	s.perfMu.Lock()
	e := s.perfMaps[key]
	if e != nil && now.Sub(e.checked) < perfMapRecheck {
		s.perfMu.Unlock()
		return e.pm
	}
	s.perfMu.Unlock()
	forget := func() *PerfMap {
		s.perfMu.Lock()
		if old := s.perfMaps[key]; old != nil {
			s.budget.Give(old.charge)
			delete(s.perfMaps, key)
		}
		s.perfMu.Unlock()
		return nil
	}
	f, err := open()
	if err != nil {
		return forget()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return forget()
	}
	if e != nil && e.size == st.Size() && e.mtime.Equal(st.ModTime()) {
		s.perfMu.Lock()
		e.checked = now
		s.perfMu.Unlock()
		return e.pm
	}
	// The text is kept (the names are views of it): charged before it
	// is read. Its lines then bound the entries, charged before any is
	// made: twice while parsing (the entries, then the index kept), once
	// kept. A line costs 32 bytes however short (a 100 MB map of short
	// lines was 1.8 GB of memory when its entries were charged by the
	// text's size).
	n := min(st.Size(), maxPerfMapBytes)
	if err := s.budget.Take(n + 1); err != nil {
		s.noteLimit(err)
		return forget()
	}
	var pm *PerfMap
	charge := n + 1
	text, err := readPerfMapText(io.LimitReader(f, n), n)
	if err == nil {
		entBytes := int64(min(perfMapLines(text), maxTextSyms)) * perfEntryBytes
		if err = s.budget.Take(2 * entBytes); err == nil {
			pm, err = parsePerfMapText(s.workContext(), text)
			s.budget.Give(entBytes)
			charge += entBytes
		}
	}
	if err != nil {
		s.noteLimit(err) // (over the budget, or out of time)
		s.budget.Give(charge)
		pm, charge = nil, 0
	}
	s.perfMu.Lock()
	if old := s.perfMaps[key]; old != nil {
		s.budget.Give(old.charge) // the map this one replaces
	}
	s.perfMaps[key] = &perfMapEntry{pm: pm, size: st.Size(), mtime: st.ModTime(), checked: now, charge: charge}
	s.perfMu.Unlock()
	return pm
}

// procStatus is what PerfMapFor needs of /proc/PID/status.
type procStatus struct {
	nspid      int // innermost pid (last NSpid field), or 0
	ruid, euid uint32
	ok         bool // the Uid line was read
}

func readProcStatus(pid int) procStatus {
	var ps procStatus
	if pid <= 0 {
		return ps
	}
	f, err := openPlain(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<16))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if fs := strings.Fields(rest); len(fs) > 0 {
				ps.nspid, _ = strconv.Atoi(fs[len(fs)-1])
			}
		}
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			fs := strings.Fields(rest)
			if len(fs) >= 2 {
				r, err1 := strconv.ParseUint(fs[0], 10, 32)
				e, err2 := strconv.ParseUint(fs[1], 10, 32)
				if err1 == nil && err2 == nil {
					ps.ruid, ps.euid, ps.ok = uint32(r), uint32(e), true
				}
			}
		}
	}
	return ps
}

// Kallsyms resolves kernel addresses.
type Kallsyms struct {
	addr []uint64
	name []string
}

// KallsymsAddrs streams a kallsyms file once and returns the address of
// each of the given names (the first text symbol of that name): for kernel
// stacks that show names with offsets but hide addresses ("[<0>]"). It
// builds no index, so its cost is one read of the file.
func KallsymsAddrs(path string, names map[string]bool) (map[string]uint64, error) {
	if len(names) == 0 {
		return map[string]uint64{}, nil
	}
	f, err := openPlain(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return kallsymsAddrs(f, names)
}

func kallsymsAddrs(f io.Reader, names map[string]bool) (map[string]uint64, error) {
	out := make(map[string]uint64, len(names))
	sc := bufio.NewScanner(io.LimitReader(f, maxPerfMapBytes))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() && len(out) < len(names) {
		line := sc.Bytes()
		// "ffffffff816d5b70 T vfs_read" (then maybe "\t[module]")
		if len(line) < 20 {
			continue
		}
		sp1 := bytes.IndexByte(line, ' ')
		if sp1 < 0 || sp1+3 >= len(line) {
			continue
		}
		typ := line[sp1+1]
		if typ != 't' && typ != 'T' || line[sp1+2] != ' ' {
			continue
		}
		name := line[sp1+3:]
		if i := bytes.IndexAny(name, " \t"); i >= 0 {
			name = name[:i]
		}
		if !names[string(name)] {
			continue
		}
		if _, dup := out[string(name)]; dup {
			continue
		}
		addr, err := strconv.ParseUint(string(line[:sp1]), 16, 64)
		if err != nil || addr == 0 {
			continue
		}
		out[string(name)] = addr
	}
	return out, sc.Err()
}

// KallsymsAddrs is the package's KallsymsAddrs over /proc/kallsyms, opened
// through the Symbolizer's Opener.
func (s *Symbolizer) KallsymsAddrs(names map[string]bool) (map[string]uint64, error) {
	if len(names) == 0 {
		return map[string]uint64{}, nil
	}
	f, err := s.opener().Open("", KallsymsPath, true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return kallsymsAddrs(f, names)
}

// Kallsyms loads /proc/kallsyms through the Symbolizer's Opener.
func (s *Symbolizer) Kallsyms() (*Kallsyms, error) {
	f, err := s.opener().Open("", KallsymsPath, true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseKallsyms(io.LimitReader(f, maxPerfMapBytes))
}

// LoadKallsyms reads /proc/kallsyms (or a file of the same format).
func LoadKallsyms(path string) (*Kallsyms, error) {
	f, err := openPlain(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseKallsyms(io.LimitReader(f, maxPerfMapBytes))
}

// ParseKallsyms parses text in /proc/kallsyms format ("ADDR TYPE NAME
// [MODULE]"). Only text symbols are kept. It returns ErrNoSymbols when every
// address is zero (kptr_restrict hides them).
func ParseKallsyms(r io.Reader) (*Kallsyms, error) {
	type ent struct {
		addr uint64
		name string
	}
	var ents []ent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxPerfMapLine)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || len(fs[1]) != 1 {
			continue
		}
		switch fs[1][0] {
		case 't', 'T', 'w', 'W':
		default:
			continue
		}
		a, err := strconv.ParseUint(fs[0], 16, 64)
		if err != nil || a == 0 {
			continue
		}
		name := fs[2]
		if len(fs) > 3 {
			name += " " + fs[3]
		}
		if len(ents) >= maxTextSyms {
			break
		}
		ents = append(ents, ent{a, name})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read kallsyms: %w", err)
	}
	if len(ents) == 0 {
		return nil, ErrNoSymbols
	}
	sort.SliceStable(ents, func(i, j int) bool { return ents[i].addr < ents[j].addr })
	k := &Kallsyms{}
	for _, e := range ents {
		k.addr = append(k.addr, e.addr)
		k.name = append(k.name, e.name)
	}
	return k, nil
}

// maxKernelSymSize bounds how far past a kernel symbol's start an address
// still takes its name (kallsyms has no sizes).
const maxKernelSymSize = 1 << 20

// Lookup returns the kernel symbol containing addr: the last one at or
// below it ("name [module]" for modules).
func (k *Kallsyms) Lookup(addr uint64) (name string, off uint64, ok bool) {
	if k == nil {
		return "", 0, false
	}
	i := sort.Search(len(k.addr), func(i int) bool { return k.addr[i] > addr }) - 1
	if i < 0 || addr-k.addr[i] >= maxKernelSymSize {
		return "", 0, false
	}
	if i == len(k.addr)-1 && addr-k.addr[i] >= 64<<10 {
		return "", 0, false
	}
	return k.name[i], addr - k.addr[i], true
}

// Len is the number of text symbols.
func (k *Kallsyms) Len() int {
	if k == nil {
		return 0
	}
	return len(k.addr)
}
