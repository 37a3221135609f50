package output

import (
	"crypto/rand"
	"encoding/binary"
	"path/filepath"
	"slices"
	"sort"

	"stackshot/internal/otlppb"
	"stackshot/internal/pprofpb"
)

// OTLPOptions is what an OTLP profile says beyond the recording itself.
type OTLPOptions struct {
	Host    string // host.name; omitted when empty
	Service string // service.name; each process's comm when empty
	Version string // the instrumentation scope's version (stackshot's)
}

// Attribute keys, from the OpenTelemetry semantic conventions.
const (
	attrHost       = "host.name"
	attrService    = "service.name"
	attrPID        = "process.pid"
	attrExeName    = "process.executable.name"
	attrExePath    = "process.executable.path"
	attrExeBuildID = "process.executable.build_id.gnu"
	// attrBuildID is the key the stackshot contract names; the semantic
	// conventions' .gnu key carries the same value.
	attrBuildID     = "process.executable.build_id"
	attrThreadName  = "thread.name"
	attrThreadID    = "thread.id"
	otlpScopeName   = "stackshot"
	otlpLabelThread = "thread"
	otlpLabelTID    = "tid"
	otlpLabelPID    = "pid"
)

// ToOTLP converts p to OTLP profiles data (the request a Collector
// receives; its Encode writes it).
//
// The samples, locations, functions and mappings are the ones WritePprof
// writes (one derivation for both formats), moved into the OTLP dictionary:
// each mapping carries its file name and its GNU build id (attribute
// process.executable.build_id.gnu), so a back end can symbolize again.
// Every process is one resource (host.name, service.name, process.pid,
// process.executable.name and .path, and the executable's build id when a
// frame showed it); an OTLP profile has one sample type, so each pprof
// sample type (samples/count, cpu/nanoseconds) becomes one profile of the
// resource, with pprof's period, start time and duration. Samples carry
// thread.name and thread.id; other pprof labels keep their names.
func ToOTLP(p *Profile, o OTLPOptions) (*otlppb.ProfilesData, error) {
	pp, err := toPprof(p)
	if err != nil {
		return nil, err
	}
	pd := &otlppb.ProfilesData{}
	b := &otlpBuilder{dict: &pd.Dictionary, strs: map[string]int32{}, attrs: map[otlpAttrKey]int32{},
		stacks: map[string]int32{}}
	b.init()
	locIdx, exeBuildID := b.dictionary(pp)
	// One resource per process, in the recording's order; a sample of a
	// process the recording does not list gets a resource of its own.
	rs := &otlpResources{pd: pd, b: b, pp: pp, o: o, exeBuildID: exeBuildID, byPID: map[int64][]*otlppb.Profile{}}
	for i := range p.Processes {
		pr := &p.Processes[i]
		if rs.byPID[int64(pr.PID)] == nil {
			rs.add(int64(pr.PID), pr)
		}
	}
	for _, s := range pp.Sample {
		var pid int64
		if v := s.NumLabel[otlpLabelPID]; len(v) == 1 {
			pid = v[0]
		}
		profiles := rs.byPID[pid]
		if profiles == nil {
			profiles = rs.add(pid, nil)
		}
		stack := b.stack(s.Location, locIdx)
		// The profiles of one sample share its attributes and its
		// values' slice: the encoder only reads them.
		attrs := b.sampleAttrs(nil, s)
		for k, op := range profiles {
			if k >= len(s.Value) || s.Value[k] == 0 {
				continue
			}
			op.Samples = append(op.Samples, otlppb.Sample{Stack: stack, Values: s.Value[k : k+1], Attributes: attrs})
		}
	}
	// The resources' attribute strings go into the string table, as
	// the Collector's encoder puts them (and reads them back).
	pd.InternResources(b.str)
	if err := pd.Check(); err != nil {
		return nil, err
	}
	return pd, nil
}

// dictionary fills the profiles' shared tables (mappings, functions,
// locations) from the pprof form, and returns the locations' indexes by
// pprof ID and the build id of each mapped file.
func (b *otlpBuilder) dictionary(pp *pprofpb.Profile) (locIdx map[uint64]int32, exeBuildID map[string]string) {
	d := b.dict
	d.Mappings = slices.Grow(d.Mappings, len(pp.Mapping))
	d.Functions = slices.Grow(d.Functions, len(pp.Function))
	d.Locations = slices.Grow(d.Locations, len(pp.Location))
	mapIdx := make(map[uint64]int32, len(pp.Mapping))
	exeBuildID = map[string]string{}
	for _, m := range pp.Mapping {
		om := otlppb.Mapping{MemoryStart: m.Start, MemoryLimit: m.Limit, FileOffset: m.Offset, Filename: b.str(m.File)}
		if m.BuildID != "" {
			om.Attributes = []int32{b.attr(attrExeBuildID, otlppb.StringValue(m.BuildID))}
			exeBuildID[m.File] = m.BuildID
		}
		mapIdx[m.ID] = int32(len(d.Mappings))
		d.Mappings = append(d.Mappings, om)
	}
	fnIdx := make(map[uint64]int32, len(pp.Function))
	for _, f := range pp.Function {
		fnIdx[f.ID] = int32(len(d.Functions))
		d.Functions = append(d.Functions, otlppb.Function{Name: b.str(f.Name), SystemName: b.str(f.SystemName),
			Filename: b.str(f.Filename), StartLine: f.StartLine})
	}
	locIdx = make(map[uint64]int32, len(pp.Location))
	// The locations' lines share one array.
	n := 0
	for _, l := range pp.Location {
		n += len(l.Line)
	}
	lines := make([]otlppb.Line, n)
	for _, l := range pp.Location {
		ol := otlppb.Location{Address: l.Address, Lines: lines[:len(l.Line):len(l.Line)]}
		lines = lines[len(l.Line):]
		if l.Mapping != nil {
			ol.Mapping = mapIdx[l.Mapping.ID]
		}
		for i, ln := range l.Line {
			if ln.Function != nil {
				ol.Lines[i].Function = fnIdx[ln.Function.ID]
			}
			ol.Lines[i].Line, ol.Lines[i].Column = ln.Line, ln.Column
		}
		locIdx[l.ID] = int32(len(d.Locations))
		d.Locations = append(d.Locations, ol)
	}
	return locIdx, exeBuildID
}

// otlpResources holds one resource (and its profiles, one per sample
// type) per process.
type otlpResources struct {
	pd         *otlppb.ProfilesData
	b          *otlpBuilder
	pp         *pprofpb.Profile
	o          OTLPOptions
	exeBuildID map[string]string
	byPID      map[int64][]*otlppb.Profile
}

// add makes the resource of process pid (pr, when the recording lists it)
// and its profiles.
func (rs *otlpResources) add(pid int64, pr *ProfileProcess) []*otlppb.Profile {
	b, pp, o := rs.b, rs.pp, rs.o
	rp := &otlppb.ResourceProfiles{}
	rs.pd.ResourceProfiles = append(rs.pd.ResourceProfiles, rp)
	put := func(k string, v otlppb.Value) { rp.Resource = append(rp.Resource, otlppb.KeyValue{Key: k, Value: v}) }
	if o.Host != "" {
		put(attrHost, otlppb.StringValue(cleanText(o.Host, false)))
	}
	put(attrPID, otlppb.IntValue(pid))
	service := o.Service
	if pr != nil {
		exe := cleanText(pr.Exe, false)
		if service == "" {
			service = pr.Comm
		}
		name := pr.Comm
		if exe != "" {
			name = filepath.Base(exe)
			put(attrExePath, otlppb.StringValue(exe))
			if id := rs.exeBuildID[exe]; id != "" {
				put(attrExeBuildID, otlppb.StringValue(id))
				put(attrBuildID, otlppb.StringValue(id))
			}
		}
		if name != "" {
			put(attrExeName, otlppb.StringValue(cleanText(name, false)))
		}
	}
	if service == "" {
		service = "unknown_service:stackshot"
	}
	put(attrService, otlppb.StringValue(cleanText(service, false)))
	sp := &otlppb.ScopeProfiles{Name: otlpScopeName, Version: o.Version}
	rp.ScopeProfiles = []*otlppb.ScopeProfiles{sp}
	var profiles []*otlppb.Profile
	for _, st := range pp.SampleType {
		op := &otlppb.Profile{
			SampleType:   otlppb.ValueType{Type: b.str(st.Type), Unit: b.str(st.Unit)},
			Period:       pp.Period,
			TimeUnixNano: uint64(pp.TimeNanos),
			DurationNano: uint64(pp.DurationNanos),
		}
		rand.Read(op.ProfileID[:])
		if pp.PeriodType != nil {
			op.PeriodType = otlppb.ValueType{Type: b.str(pp.PeriodType.Type), Unit: b.str(pp.PeriodType.Unit)}
		}
		sp.Profiles = append(sp.Profiles, op)
		profiles = append(profiles, op)
	}
	rs.byPID[pid] = profiles
	return profiles
}

// otlpBuilder fills an OTLP dictionary, each table indexed by a map.
type otlpBuilder struct {
	dict   *otlppb.Dictionary
	strs   map[string]int32
	attrs  map[otlpAttrKey]int32
	stacks map[string]int32
	key    []byte
}

// otlpAttrKey is an attribute table entry's identity.
type otlpAttrKey struct {
	key string
	val otlppb.Value
}

// init puts each table's zero entry at index 0, as OTLP requires (index 0
// means "none").
func (b *otlpBuilder) init() {
	b.str("")
	d := b.dict
	d.Mappings = append(d.Mappings, otlppb.Mapping{})
	d.Locations = append(d.Locations, otlppb.Location{})
	d.Functions = append(d.Functions, otlppb.Function{})
	d.Links = append(d.Links, otlppb.Link{})
	d.Stacks = append(d.Stacks, otlppb.Stack{})
	d.Attributes = append(d.Attributes, otlppb.Attribute{})
}

func (b *otlpBuilder) str(s string) int32 {
	if i, ok := b.strs[s]; ok {
		return i
	}
	i := int32(len(b.dict.Strings))
	b.dict.Strings = append(b.dict.Strings, s)
	b.strs[s] = i
	return i
}

// attr returns the index of an attribute.
func (b *otlpBuilder) attr(key string, v otlppb.Value) int32 {
	k := otlpAttrKey{key, v}
	if i, ok := b.attrs[k]; ok {
		return i
	}
	i := int32(len(b.dict.Attributes))
	b.dict.Attributes = append(b.dict.Attributes, otlppb.Attribute{Key: b.str(key), Value: v})
	b.attrs[k] = i
	return i
}

func (b *otlpBuilder) stack(locs []*pprofpb.Location, locIdx map[uint64]int32) int32 {
	k := b.key[:0]
	for _, l := range locs {
		k = binary.LittleEndian.AppendUint32(k, uint32(locIdx[l.ID]))
	}
	b.key = k
	if i, ok := b.stacks[string(k)]; ok {
		return i
	}
	st := otlppb.Stack{Locations: make([]int32, len(locs))}
	for j, l := range locs {
		st.Locations[j] = locIdx[l.ID]
	}
	i := int32(len(b.dict.Stacks))
	b.dict.Stacks = append(b.dict.Stacks, st)
	b.stacks[string(k)] = i
	return i
}

// sampleAttrs appends the attribute indexes of a pprof sample's labels:
// thread and tid become thread.name and thread.id, pid is the resource's.
func (b *otlpBuilder) sampleAttrs(out []int32, s *pprofpb.Sample) []int32 {
	for _, k := range sortedKeys(s.Label) {
		for _, v := range s.Label[k] {
			key := k
			if k == otlpLabelThread {
				key = attrThreadName
			}
			out = append(out, b.attr(key, otlppb.StringValue(v)))
		}
	}
	for _, k := range sortedKeys(s.NumLabel) {
		if k == otlpLabelPID {
			continue
		}
		for _, v := range s.NumLabel[k] {
			key := k
			if k == otlpLabelTID {
				key = attrThreadID
			}
			out = append(out, b.attr(key, otlppb.IntValue(v)))
		}
	}
	return out
}
func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 1 {
		for k := range m {
			return []string{k}
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
