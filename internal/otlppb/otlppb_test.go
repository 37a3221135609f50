package otlppb

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pprofile"
)

// sample is a request with one of each table entry, index 0 of each the
// empty one.
func sample() *ProfilesData {
	return &ProfilesData{
		ResourceProfiles: []*ResourceProfiles{{
			Resource: []KeyValue{{Key: "process.pid", Value: IntValue(0)}, {Key: "host.name", Value: StringValue(strings.Repeat("h", 300))}},
			ScopeProfiles: []*ScopeProfiles{{Name: "stackshot", Version: "v1", Profiles: []*Profile{{
				SampleType: ValueType{Type: 1, Unit: 2}, PeriodType: ValueType{Type: 1, Unit: 2}, Period: 1e7,
				TimeUnixNano: 1 << 62, DurationNano: 3e9, ProfileID: [16]byte{1, 2, 3},
				Samples: []Sample{{Stack: 1, Values: []int64{-1, 1 << 40}, Attributes: []int32{1}}, {}},
			}}}},
		}},
		Dictionary: Dictionary{
			Strings:    []string{"", "cpu", "nanoseconds", "main", "/bin/app", "thread.name", "ünï"},
			Mappings:   []Mapping{{}, {MemoryStart: 0x400000, MemoryLimit: 0x500000, FileOffset: 0x1000, Filename: 4, Attributes: []int32{1}}},
			Functions:  []Function{{}, {Name: 3, SystemName: 3, Filename: 4, StartLine: 10}},
			Locations:  []Location{{}, {Mapping: 1, Address: 0x401000, Lines: []Line{{Function: 1, Line: 12, Column: 3}, {Function: 1}}}},
			Links:      []Link{{}},
			Attributes: []Attribute{{}, {Key: 5, Value: StringValue("ünï")}},
			Stacks:     []Stack{{}, {Locations: []int32{1, 1}}},
		},
	}
}

// TestEncodeReadByPdata: the Collector's pdata reads every field written,
// the resources' attributes in full or as references to the string table.
func TestEncodeReadByPdata(t *testing.T) {
	t.Run("in-full", func(t *testing.T) { readByPdata(t, sample()) })
	t.Run("interned", func(t *testing.T) {
		p := sample()
		strs := &p.Dictionary.Strings
		p.InternResources(func(s string) int32 {
			if i := slices.Index(*strs, s); i >= 0 {
				return int32(i)
			}
			*strs = append(*strs, s)
			return int32(len(*strs) - 1)
		})
		kv := p.ResourceProfiles[0].Resource[1]
		if kv.Key != "" || kv.KeyIndex != 8 || kv.Value != StringIndexValue(9) || len(*strs) != 10 {
			t.Fatalf("interned %+v into %q", kv, *strs)
		}
		readByPdata(t, p)
	})
}

func readByPdata(t *testing.T, p *ProfilesData) {
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	var u pprofile.ProtoUnmarshaler
	pd, err := u.UnmarshalProfiles(p.Encode())
	if err != nil {
		t.Fatal(err)
	}
	rp := pd.ResourceProfiles().At(0)
	if v, ok := rp.Resource().Attributes().Get("process.pid"); !ok || v.Int() != 0 {
		t.Errorf("pid %v %v", v, ok)
	}
	if v, _ := rp.Resource().Attributes().Get("host.name"); v.Str() != strings.Repeat("h", 300) {
		t.Errorf("host.name %q", v.Str())
	}
	sp := rp.ScopeProfiles().At(0)
	prof := sp.Profiles().At(0)
	if sp.Scope().Name() != "stackshot" || sp.Scope().Version() != "v1" || uint64(prof.Time()) != 1<<62 ||
		prof.DurationNano() != 3e9 || prof.Period() != 1e7 || prof.ProfileID() != [16]byte{1, 2, 3} ||
		prof.SampleType().UnitStrindex() != 2 || prof.PeriodType().TypeStrindex() != 1 {
		t.Errorf("profile header: scope %q %q time %d dur %d period %d id %v", sp.Scope().Name(), sp.Scope().Version(),
			prof.Time(), prof.DurationNano(), prof.Period(), prof.ProfileID())
	}
	s := prof.Samples().At(0)
	if s.StackIndex() != 1 || s.Values().Len() != 2 || s.Values().At(0) != -1 || s.Values().At(1) != 1<<40 ||
		s.AttributeIndices().Len() != 1 || s.AttributeIndices().At(0) != 1 || prof.Samples().Len() != 2 {
		t.Errorf("sample: stack %d values %v attrs %v", s.StackIndex(), s.Values().AsRaw(), s.AttributeIndices().AsRaw())
	}
	d := pd.Dictionary()
	if got := d.StringTable().AsRaw(); !slices.Equal(got[:7], strings.Split("|cpu|nanoseconds|main|/bin/app|thread.name|ünï", "|")) {
		t.Errorf("strings %q", got)
	}
	m := d.MappingTable().At(1)
	if d.MappingTable().Len() != 2 || m.MemoryStart() != 0x400000 || m.MemoryLimit() != 0x500000 || m.FileOffset() != 0x1000 ||
		m.FilenameStrindex() != 4 || m.AttributeIndices().At(0) != 1 {
		t.Errorf("mapping %+v", m)
	}
	f := d.FunctionTable().At(1)
	if f.NameStrindex() != 3 || f.SystemNameStrindex() != 3 || f.FilenameStrindex() != 4 || f.StartLine() != 10 {
		t.Errorf("function %+v", f)
	}
	l := d.LocationTable().At(1)
	if l.MappingIndex() != 1 || l.Address() != 0x401000 || l.Lines().Len() != 2 ||
		l.Lines().At(0).FunctionIndex() != 1 || l.Lines().At(0).Line() != 12 || l.Lines().At(0).Column() != 3 {
		t.Errorf("location %+v", l)
	}
	a := d.AttributeTable().At(1)
	if d.AttributeTable().Len() != 2 || a.KeyStrindex() != 5 || a.Value().Str() != "ünï" {
		t.Errorf("attribute %+v", a)
	}
	if d.StackTable().Len() != 2 || d.LinkTable().Len() != 1 || d.StackTable().At(1).LocationIndices().Len() != 2 {
		t.Errorf("%d stacks %d links", d.StackTable().Len(), d.LinkTable().Len())
	}
}

// TestEncodeStable: the same data encodes to the same bytes.
func TestEncodeStable(t *testing.T) {
	if a, b := sample().Encode(), sample().Encode(); !bytes.Equal(a, b) {
		t.Error("two encodings of the same data differ")
	}
}

// TestCheck: an index outside its table is reported.
func TestCheck(t *testing.T) {
	for name, spoil := range map[string]func(p *ProfilesData){
		"mapping file":   func(p *ProfilesData) { p.Dictionary.Mappings[1].Filename = 7 },
		"location map":   func(p *ProfilesData) { p.Dictionary.Locations[1].Mapping = 2 },
		"line function":  func(p *ProfilesData) { p.Dictionary.Locations[1].Lines[1].Function = -1 },
		"attribute key":  func(p *ProfilesData) { p.Dictionary.Attributes[1].Key = 99 },
		"stack location": func(p *ProfilesData) { p.Dictionary.Stacks[1].Locations[0] = 2 },
		"sample stack":   func(p *ProfilesData) { p.ResourceProfiles[0].ScopeProfiles[0].Profiles[0].Samples[0].Stack = 2 },
		"sample attr":    func(p *ProfilesData) { p.ResourceProfiles[0].ScopeProfiles[0].Profiles[0].Samples[0].Attributes[0] = 2 },
		"sample type":    func(p *ProfilesData) { p.ResourceProfiles[0].ScopeProfiles[0].Profiles[0].SampleType.Unit = 7 },
		"resource key":   func(p *ProfilesData) { p.ResourceProfiles[0].Resource[0].KeyIndex = 7 },
		"resource value": func(p *ProfilesData) { p.ResourceProfiles[0].Resource[0].Value = StringIndexValue(-1) },
	} {
		p := sample()
		spoil(p)
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), "out of") {
			t.Errorf("%s: Check said %v", name, err)
		}
	}
}
