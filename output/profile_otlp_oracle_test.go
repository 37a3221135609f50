package output

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"stackshot/internal/pprofpb"
)

// pdataOTLP is ToOTLP as it was written with the Collector's own pdata
// package, kept as the oracle the hand-written encoding is compared with.
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
func pdataOTLP(p *Profile, o OTLPOptions) (pprofile.Profiles, error) {
	pp, err := toPprof(p)
	if err != nil {
		return pprofile.Profiles{}, err
	}
	pd := pprofile.NewProfiles()
	b := &pdataBuilder{dict: pd.Dictionary(), strs: map[string]int32{}, attrs: map[string]int32{},
		stacks: map[string]int32{}}
	b.init()
	locIdx, exeBuildID := b.dictionary(pp)
	// One resource per process, in the recording's order; a sample of a
	// process the recording does not list gets a resource of its own.
	rs := &pdataResources{pd: pd, b: b, pp: pp, o: o, exeBuildID: exeBuildID, byPID: map[int64][]pprofile.Profile{}}
	for i := range p.Processes {
		pr := &p.Processes[i]
		if rs.byPID[int64(pr.PID)] == nil {
			rs.add(int64(pr.PID), pr)
		}
	}
	var attrs []int32
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
		attrs = b.sampleAttrs(attrs[:0], s)
		for k, op := range profiles {
			if k >= len(s.Value) || s.Value[k] == 0 {
				continue
			}
			sm := op.Samples().AppendEmpty()
			sm.SetStackIndex(stack)
			sm.Values().Append(s.Value[k])
			sm.AttributeIndices().Append(attrs...)
		}
	}
	return pd, nil
}

// dictionary fills the profiles' shared tables (mappings, functions,
// locations) from the pprof form, and returns the locations' indexes by
// pprof ID and the build id of each mapped file.
func (b *pdataBuilder) dictionary(pp *pprofpb.Profile) (locIdx map[uint64]int32, exeBuildID map[string]string) {
	// The dictionary: mappings, functions, locations (indexes by pprof ID).
	mapIdx := make(map[uint64]int32, len(pp.Mapping))
	exeBuildID = map[string]string{}
	for _, m := range pp.Mapping {
		om := b.dict.MappingTable().AppendEmpty()
		om.SetMemoryStart(m.Start)
		om.SetMemoryLimit(m.Limit)
		om.SetFileOffset(m.Offset)
		om.SetFilenameStrindex(b.str(m.File))
		if m.BuildID != "" {
			om.AttributeIndices().Append(b.attr(attrExeBuildID, m.BuildID))
			exeBuildID[m.File] = m.BuildID
		}
		mapIdx[m.ID] = int32(b.dict.MappingTable().Len() - 1)
	}
	fnIdx := make(map[uint64]int32, len(pp.Function))
	for _, f := range pp.Function {
		of := b.dict.FunctionTable().AppendEmpty()
		of.SetNameStrindex(b.str(f.Name))
		of.SetSystemNameStrindex(b.str(f.SystemName))
		of.SetFilenameStrindex(b.str(f.Filename))
		of.SetStartLine(f.StartLine)
		fnIdx[f.ID] = int32(b.dict.FunctionTable().Len() - 1)
	}
	locIdx = make(map[uint64]int32, len(pp.Location))
	for _, l := range pp.Location {
		ol := b.dict.LocationTable().AppendEmpty()
		if l.Mapping != nil {
			ol.SetMappingIndex(mapIdx[l.Mapping.ID])
		}
		ol.SetAddress(l.Address)
		for _, ln := range l.Line {
			oln := ol.Lines().AppendEmpty()
			if ln.Function != nil {
				oln.SetFunctionIndex(fnIdx[ln.Function.ID])
			}
			oln.SetLine(ln.Line)
			oln.SetColumn(ln.Column)
		}
		locIdx[l.ID] = int32(b.dict.LocationTable().Len() - 1)
	}
	return locIdx, exeBuildID
}

// pdataResources holds one resource (and its profiles, one per sample
// type) per process.
type pdataResources struct {
	pd         pprofile.Profiles
	b          *pdataBuilder
	pp         *pprofpb.Profile
	o          OTLPOptions
	exeBuildID map[string]string
	byPID      map[int64][]pprofile.Profile
}

// add makes the resource of process pid (pr, when the recording lists it)
// and its profiles.
func (rs *pdataResources) add(pid int64, pr *ProfileProcess) []pprofile.Profile {
	b, pp, o := rs.b, rs.pp, rs.o
	rp := rs.pd.ResourceProfiles().AppendEmpty()
	at := rp.Resource().Attributes()
	if o.Host != "" {
		at.PutStr(attrHost, cleanText(o.Host, false))
	}
	at.PutInt(attrPID, pid)
	service := o.Service
	if pr != nil {
		exe := cleanText(pr.Exe, false)
		if service == "" {
			service = pr.Comm
		}
		name := pr.Comm
		if exe != "" {
			name = filepath.Base(exe)
			at.PutStr(attrExePath, exe)
			if id := rs.exeBuildID[exe]; id != "" {
				at.PutStr(attrExeBuildID, id)
				at.PutStr(attrBuildID, id)
			}
		}
		if name != "" {
			at.PutStr(attrExeName, cleanText(name, false))
		}
	}
	if service == "" {
		service = "unknown_service:stackshot"
	}
	at.PutStr(attrService, cleanText(service, false))
	sp := rp.ScopeProfiles().AppendEmpty()
	sp.Scope().SetName(otlpScopeName)
	sp.Scope().SetVersion(o.Version)
	var profiles []pprofile.Profile
	for _, st := range pp.SampleType {
		op := sp.Profiles().AppendEmpty()
		var id pprofile.ProfileID
		rand.Read(id[:])
		op.SetProfileID(id)
		op.SampleType().SetTypeStrindex(b.str(st.Type))
		op.SampleType().SetUnitStrindex(b.str(st.Unit))
		if pp.PeriodType != nil {
			op.PeriodType().SetTypeStrindex(b.str(pp.PeriodType.Type))
			op.PeriodType().SetUnitStrindex(b.str(pp.PeriodType.Unit))
		}
		op.SetPeriod(pp.Period)
		op.SetTime(pcommon.Timestamp(pp.TimeNanos))
		op.SetDurationNano(uint64(pp.DurationNanos))
		profiles = append(profiles, op)
	}
	rs.byPID[pid] = profiles
	return profiles
}

// pdataBuilder fills an OTLP dictionary, each table indexed by a map (the
// pdata helpers search linearly).
type pdataBuilder struct {
	dict   pprofile.ProfilesDictionary
	strs   map[string]int32
	attrs  map[string]int32
	stacks map[string]int32
	key    []byte
}

// init puts each table's zero entry at index 0, as OTLP requires (index 0
// means "none").
func (b *pdataBuilder) init() {
	b.str("")
	b.dict.MappingTable().AppendEmpty()
	b.dict.LocationTable().AppendEmpty()
	b.dict.FunctionTable().AppendEmpty()
	b.dict.LinkTable().AppendEmpty()
	b.dict.StackTable().AppendEmpty()
	b.dict.AttributeTable().AppendEmpty()
}

func (b *pdataBuilder) str(s string) int32 {
	if i, ok := b.strs[s]; ok {
		return i
	}
	t := b.dict.StringTable()
	t.Append(s)
	i := int32(t.Len() - 1)
	b.strs[s] = i
	return i
}

// attr returns the index of a string or int64 attribute.
func (b *pdataBuilder) attr(key string, v any) int32 {
	var k string
	switch v := v.(type) {
	case string:
		k = key + "\x00s" + v
	case int64:
		k = key + "\x00i" + strconv.FormatInt(v, 10)
	default:
		panic(fmt.Sprintf("otlp attribute %s of type %T", key, v))
	}
	if i, ok := b.attrs[k]; ok {
		return i
	}
	kv := b.dict.AttributeTable().AppendEmpty()
	kv.SetKeyStrindex(b.str(key))
	switch v := v.(type) {
	case string:
		kv.Value().SetStr(v)
	case int64:
		kv.Value().SetInt(v)
	}
	i := int32(b.dict.AttributeTable().Len() - 1)
	b.attrs[k] = i
	return i
}

func (b *pdataBuilder) stack(locs []*pprofpb.Location, locIdx map[uint64]int32) int32 {
	k := b.key[:0]
	for _, l := range locs {
		k = binary.LittleEndian.AppendUint32(k, uint32(locIdx[l.ID]))
	}
	b.key = k
	if i, ok := b.stacks[string(k)]; ok {
		return i
	}
	st := b.dict.StackTable().AppendEmpty()
	for _, l := range locs {
		st.LocationIndices().Append(locIdx[l.ID])
	}
	i := int32(b.dict.StackTable().Len() - 1)
	b.stacks[string(k)] = i
	return i
}

// sampleAttrs appends the attribute indexes of a pprof sample's labels:
// thread and tid become thread.name and thread.id, pid is the resource's.
func (b *pdataBuilder) sampleAttrs(out []int32, s *pprofpb.Sample) []int32 {
	for _, k := range sortedKeys(s.Label) {
		for _, v := range s.Label[k] {
			key := k
			if k == otlpLabelThread {
				key = attrThreadName
			}
			out = append(out, b.attr(key, v))
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
			out = append(out, b.attr(key, v))
		}
	}
	return out
}
