package output

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"stackshot/internal/pprofpb"
	"stackshot/report"
)

// kernelMapping is the file name of the one mapping all kernel frames share.
const kernelMapping = "[kernel]"

// unknownMapping is the file name of the per-process mapping for user frames
// outside any known module (anonymous or JIT code).
const unknownMapping = "[unknown]"

// errNoFreq is returned when a profile has no sampling frequency, from which
// the pprof period and cpu values are derived.
var errNoFreq = errors.New("profile has no sampling frequency")

// WritePprof writes p as a gzipped pprof protobuf (what `go tool pprof`
// reads).
//
// Sample values are samples/count and CLOCK/nanoseconds (count * 1e9/FreqHz),
// where CLOCK is "cpu" for an on-CPU profile (every sample is of a running
// thread) and "wall" when Profile.OffCPU is set (every thread at every tick,
// so the values of N threads add up to N times the duration); the period is
// CLOCK/nanoseconds, 1e9/FreqHz. Each sample carries the labels
// thread (name), tid and pid (numeric).
//
// Mappings: one per module as loaded (same file, build id and load bias; a
// library loaded at different addresses in two processes gets two). When
// the frames carry the real mapping (MapStart/MapLimit/MapOffset, as live
// captures do), Start, Limit and Offset are that mapping's; otherwise Start
// and Limit are the smallest and largest PC seen in it (Limit exclusive)
// and Offset the module address of Start (the ELF virtual address, equal
// to the file offset for the usual layout of executable segments). Kernel
// frames share one "[kernel]" mapping; user frames outside any module get a
// per-process "[unknown]" mapping. The main executables come first.
//
// HasFilenames, HasLineNumbers and HasInlineFrames say whether some frame
// in the mapping has a file, a line, or inlined frames. HasFunctions is set
// on every mapping: stackshot symbolized every frame (a frame it could not
// name gets a placeholder, below), and pprof must not redo it: ranges taken
// from sampled PCs do not tell it where a module's segments were mapped, so
// its guesses would name the wrong functions (worse when the binary on disk
// was replaced). `pprof -symbolize=force` still can.
//
// Locations: Address is the frame's PC; a frame and the frames inlined into
// it (the ones with Inlined set that precede it, sharing its PC) make one
// location whose Line entries are innermost first. A frame without a
// function name gets a placeholder function named as in folded stacks
// ("module+0xoffset") with no file, so every location has a name.
func WritePprof(w io.Writer, p *Profile) error {
	pp, err := toPprof(p)
	if err != nil {
		return err
	}
	if err := pp.Check(); err != nil {
		return fmt.Errorf("building pprof profile: %w", err)
	}
	if err := pp.Write(w); err != nil {
		return fmt.Errorf("writing pprof profile: %w", err)
	}
	return nil
}

type mappingKey struct {
	file    string
	buildID string
	bias    uint64 // PC - module offset; for kernel/unknown mappings 0
	pid     int    // only for unknown mappings (addresses are per process)
}

type functionKey struct {
	name, file string
}

type pprofBuilder struct {
	out       *pprofpb.Profile
	mappings  map[mappingKey]*pprofMapping
	mapOrder  []*pprofMapping
	functions map[functionKey]*pprofpb.Function
	named     map[functionKey]*pprofpb.Function // by the frame's raw name and file
	byBias    map[uint64]*pprofMapping          // the last mapping of each load bias
	locCache  map[locSite]locCached
	locations map[string]*pprofpb.Location
	key       []byte // reused location key
}

// pprofMapping is a mapping being assembled, with what its frames showed.
type pprofMapping struct {
	m      *pprofpb.Mapping
	key    mappingKey
	havePC bool
	minPC  uint64
	maxPC  uint64
	minOff uint64 // module offset of minPC
	hasOff bool
	main   bool // some process's executable
	// The real mapping, when the frames carried it (live captures do).
	realStart, realLimit, realOff uint64
}

func toPprof(p *Profile) (*pprofpb.Profile, error) {
	if p.FreqHz <= 0 {
		return nil, errNoFreq
	}
	period := int64(1e9) / int64(p.FreqHz)
	clock := "cpu"
	if p.OffCPU {
		clock = "wall"
	}
	out := &pprofpb.Profile{
		SampleType: []*pprofpb.ValueType{
			{Type: "samples", Unit: "count"},
			{Type: clock, Unit: "nanoseconds"},
		},
		DefaultSampleType: clock,
		PeriodType:        &pprofpb.ValueType{Type: clock, Unit: "nanoseconds"},
		Period:            period,
		DurationNanos:     p.Duration.Nanoseconds(),
	}
	if !p.Start.IsZero() {
		out.TimeNanos = p.Start.UnixNano()
	}
	out.Comments = pprofComments(p)
	b := &pprofBuilder{
		out:       out,
		mappings:  map[mappingKey]*pprofMapping{},
		functions: map[functionKey]*pprofpb.Function{},
		named:     map[functionKey]*pprofpb.Function{},
		byBias:    map[uint64]*pprofMapping{},
		locCache:  map[locSite]locCached{},
		locations: map[string]*pprofpb.Location{},
	}
	exes := map[string]bool{}
	for _, pr := range p.Processes {
		if pr.Exe != "" {
			exes[pr.Exe] = true
		}
	}
	for i := range p.Samples {
		s := &p.Samples[i]
		if s.Count <= 0 {
			continue
		}
		ps := &pprofpb.Sample{
			Value:    []int64{s.Count, cpuNanos(s.Count, p.FreqHz)},
			Label:    map[string][]string{"thread": {cleanText(s.Thread, false)}},
			NumLabel: map[string][]int64{"tid": {int64(s.TID)}, "pid": {int64(s.PID)}},
		}
		ps.Location = b.locationsFor(s, exes)
		out.Sample = append(out.Sample, ps)
	}
	b.finishMappings()
	return out, nil
}

// cpuNanos is count * 1e9/hz without overflow for any realistic count.
func cpuNanos(count int64, hz int) int64 {
	h := int64(hz)
	return count*(1e9/h) + count*(1e9%h)/h
}

func pprofComments(p *Profile) []string {
	st := &p.Stats
	c := []string{fmt.Sprintf("stackshot record: %d Hz requested, %.1f Hz achieved, %d samples of %d threads",
		p.FreqHz, st.AchievedHz, st.Samples, st.Threads)}
	if st.Truncated > 0 {
		c = append(c, fmt.Sprintf("truncated stacks: %d (%s)", st.Truncated, reasonList(st.TruncatedWhy)))
	}
	switch {
	case st.Sampler == "perf":
		c = append(c, fmt.Sprintf("running threads sampled with perf events, no stop: %d samples, %d of them a runnable thread's latest",
			st.Perf, st.PerfHeld))
	case st.Sampler != "":
		c = append(c, "running threads sampled with ptrace stops")
	}
	if st.SamplerWhy != "" {
		c = append(c, "sampler: "+st.SamplerWhy)
	}
	if st.PauseMaxUS > 0 {
		c = append(c, fmt.Sprintf("per-thread pause: median %.1fus, p99 %.1fus, max %.1fus",
			st.PauseMedUS, st.PauseP99US, st.PauseMaxUS))
	}
	return c
}

// reasonList renders counts by reason, largest first.
func reasonList(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var sb strings.Builder
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s %d", k, m[k])
	}
	return sb.String()
}

// locationsFor returns the sample's locations, leaf first.
func (b *pprofBuilder) locationsFor(s *Sample, exes map[string]bool) []*pprofpb.Location {
	locs := make([]*pprofpb.Location, 0, len(s.Frames))
	fr := s.Frames
	for i := 0; i < len(fr); {
		// A location is a run of inlined frames closed by the frame they
		// were inlined into (same PC, same module); a run that is not closed
		// that way ends where it stops matching.
		j := i
		for j+1 < len(fr) && fr[j].Inlined && sameSite(&fr[j], &fr[j+1]) {
			j++
		}
		locs = append(locs, b.location(s.PID, fr[i:j+1], exes))
		i = j + 1
	}
	return locs
}

func sameSite(a, b *report.Frame) bool {
	return a.PC == b.PC && a.Kind == b.Kind && a.Module == b.Module
}

func (b *pprofBuilder) location(pid int, group []report.Frame, exes map[string]bool) *pprofpb.Location {
	outer := &group[len(group)-1]
	pm := b.mapping(pid, outer, exes)
	// A site seen before with the same names is the same location: no
	// key to build (most frames of a profile are such repeats).
	site := locSite{pm: pm, pc: outer.PC, n: len(group)}
	if c, ok := b.locCache[site]; ok && sameNames(c.group, group) {
		return c.loc
	}
	// The key: mapping, PC, and the functions and lines of the group, so
	// frames at one address that were named differently stay apart.
	var fns [8]*pprofpb.Function
	fnl := fns[:0]
	k := b.key[:0]
	k = binary.LittleEndian.AppendUint64(k, pm.m.ID)
	k = binary.LittleEndian.AppendUint64(k, outer.PC)
	for gi := range group {
		f := &group[gi]
		fn := b.function(f, pm)
		fnl = append(fnl, fn)
		k = binary.LittleEndian.AppendUint64(k, fn.ID)
		k = binary.LittleEndian.AppendUint64(k, uint64(f.Line))
	}
	b.key = k
	if l, ok := b.locations[string(k)]; ok {
		b.locCache[site] = locCached{loc: l, group: group}
		return l
	}
	lines := make([]pprofpb.Line, len(group))
	for gi := range group {
		lines[gi] = pprofpb.Line{Function: fnl[gi], Line: int64(group[gi].Line)}
	}
	if len(group) > 1 {
		pm.m.HasInlineFrames = true
	}
	l := &pprofpb.Location{ID: uint64(len(b.out.Location) + 1), Mapping: pm.m, Address: outer.PC, Line: lines}
	b.out.Location = append(b.out.Location, l)
	b.locations[string(k)] = l
	b.locCache[site] = locCached{loc: l, group: group}
	return l
}

// locSite is where a location is: mapping, PC, and how many frames
// (inlined ones and theirs) it has.
type locSite struct {
	pm *pprofMapping
	pc uint64
	n  int
}

// locCached is the last location made at a site, with the frames it was
// made of (read only).
type locCached struct {
	loc   *pprofpb.Location
	group []report.Frame
}

// sameNames tells whether two groups of frames at one site name the same
// functions, files and lines (strings shared by the symbolizer compare by
// pointer).
func sameNames(a, b []report.Frame) bool {
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Function != y.Function || x.File != y.File || x.Line != y.Line ||
			x.SignalFrame != y.SignalFrame || x.Inlined != y.Inlined || x.Kind != y.Kind {
			return false
		}
	}
	return true
}

func (b *pprofBuilder) mapping(pid int, f *report.Frame, exes map[string]bool) *pprofMapping {
	var key mappingKey
	switch {
	case f.Kind == "kernel":
		key = mappingKey{file: kernelMapping}
	case f.Module != "" && f.HasModule:
		key = mappingKey{file: f.Module, buildID: f.BuildID, bias: f.PC - f.ModuleOffset}
	case f.Module != "":
		key = mappingKey{file: f.Module, buildID: f.BuildID, pid: pid}
	default:
		key = mappingKey{file: unknownMapping, pid: pid}
	}
	// Most frames are in a module loaded before: found by its load bias
	// (a number) before hashing its names.
	pm := b.byBias[key.bias]
	if pm == nil || key.bias == 0 || pm.key != key {
		pm = b.mappings[key]
	}
	if pm == nil {
		pm = &pprofMapping{
			m: &pprofpb.Mapping{ID: uint64(len(b.mapOrder) + 1),
				File: cleanText(key.file, false), BuildID: cleanText(key.buildID, false)},
			main: f.Kind != "kernel" && exes[f.Module],
			key:  key,
		}
		b.mappings[key] = pm
		b.mapOrder = append(b.mapOrder, pm)
		if key.bias != 0 {
			b.byBias[key.bias] = pm
		}
	}
	if f.PC != 0 && (!pm.havePC || f.PC < pm.minPC) {
		pm.minPC = f.PC
		pm.hasOff = f.HasModule && f.Kind != "kernel"
		pm.minOff = f.ModuleOffset
	}
	if f.PC != 0 && (!pm.havePC || f.PC > pm.maxPC) {
		pm.maxPC = f.PC
	}
	if f.PC != 0 {
		pm.havePC = true
	}
	if f.MapLimit > f.MapStart && f.Kind != "kernel" && (pm.realLimit == 0 || f.MapStart < pm.realStart) {
		if pm.realLimit < f.MapLimit {
			pm.realLimit = f.MapLimit
		}
		pm.realStart, pm.realOff = f.MapStart, f.MapOffset
	} else if f.MapLimit > pm.realLimit && pm.realLimit != 0 {
		pm.realLimit = f.MapLimit
	}
	return pm
}

func (b *pprofBuilder) function(f *report.Frame, pm *pprofMapping) *pprofpb.Function {
	if f.Function != "" && !f.SignalFrame {
		// Seen before under these very names: no cleaning again (most
		// frames of a profile are).
		if fn, ok := b.named[functionKey{name: f.Function, file: f.File}]; ok {
			if f.File != "" {
				pm.m.HasFilenames = true
			}
			if f.Line > 0 {
				pm.m.HasLineNumbers = true
			}
			return fn
		}
	}
	var name string
	known := f.Function != "" || f.SignalFrame
	if known {
		if f.SignalFrame {
			name = "<signal handler called>"
		} else {
			name = cleanText(f.Function, false)
		}
		if f.File != "" {
			pm.m.HasFilenames = true
		}
		if f.Line > 0 {
			pm.m.HasLineNumbers = true
		}
	} else {
		// A placeholder named as in folded stacks, so pprof shows the
		// module and offset rather than a bare address.
		// Kernel ones go without the folded "_[k]": their mapping says it.
		name, _ = frameName(f)
		name = strings.TrimSuffix(name, kernelSuffix)
	}
	file := ""
	if known {
		file = cleanText(f.File, false)
	}
	k := functionKey{name: name, file: file}
	fn, ok := b.functions[k]
	if !ok {
		fn = &pprofpb.Function{ID: uint64(len(b.out.Function) + 1), Name: name, SystemName: name, Filename: file}
		b.out.Function = append(b.out.Function, fn)
		b.functions[k] = fn
	}
	if f.Function != "" && !f.SignalFrame {
		b.named[functionKey{name: f.Function, file: f.File}] = fn
	}
	return fn
}

// finishMappings sets ranges and flags and puts the main executables first
// (pprof takes the first mapping as the main binary), then the rest in
// order of first appearance, and numbers them.
func (b *pprofBuilder) finishMappings() {
	ms := append([]*pprofMapping(nil), b.mapOrder...)
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].main && !ms[j].main })
	for i, pm := range ms {
		m := pm.m
		m.ID = uint64(i + 1)
		switch {
		case pm.realLimit != 0:
			// The real mapping: Offset is the file offset of Start, so
			// pprof can map addresses back to the file itself.
			m.Start, m.Limit, m.Offset = pm.realStart, pm.realLimit, pm.realOff
		case pm.havePC:
			m.Start = pm.minPC
			m.Limit = pm.maxPC + 1
			if pm.hasOff {
				m.Offset = pm.minOff
			}
		}
		m.HasFunctions = true
		b.out.Mapping = append(b.out.Mapping, m)
	}
}
