package pprofpb

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// sample is a profile using every field this package writes, with
// values that need several varint bytes and a negative one.
func sample() *Profile {
	m1 := &Mapping{ID: 1, Start: 0x400000, Limit: 0x401000, Offset: 0x1000, File: "/bin/app", BuildID: "abcdef0123",
		HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true}
	m2 := &Mapping{ID: 2, Start: 0x7f0000000000, Limit: 0x7f0000200000, File: "/lib/libc.so.6", HasFunctions: true}
	f1 := &Function{ID: 1, Name: "main", SystemName: "main", Filename: "app.c", StartLine: 3}
	f2 := &Function{ID: 2, Name: "inl", SystemName: "_Z3inlv", Filename: "app.h", StartLine: -1}
	f3 := &Function{ID: 3, Name: "libc.so.6+0x1234", SystemName: "libc.so.6+0x1234"}
	l1 := &Location{ID: 1, Mapping: m1, Address: 0x400123, Line: []Line{{Function: f2, Line: 7, Column: 2}, {Function: f1, Line: 12}}}
	l2 := &Location{ID: 2, Mapping: m2, Address: 0x7f0000001234, Line: []Line{{Function: f3}}}
	l3 := &Location{ID: 300, Address: 0xffffffff81000000}
	return &Profile{
		SampleType:        []*ValueType{{Type: "samples", Unit: "count"}, {Type: "wall", Unit: "nanoseconds"}},
		DefaultSampleType: "wall",
		PeriodType:        &ValueType{Type: "wall", Unit: "nanoseconds"},
		Period:            10101010,
		TimeNanos:         1764600000123456789,
		DurationNanos:     4e9,
		Comments:          []string{"stackshot record", "threads: 2"},
		Mapping:           []*Mapping{m1, m2},
		Function:          []*Function{f1, f2, f3},
		Location:          []*Location{l1, l2, l3},
		Sample: []*Sample{
			{Location: []*Location{l2, l1}, Value: []int64{3, 30303030},
				Label: map[string][]string{"thread": {"w-0"}, "a": {"x", "y"}}, NumLabel: map[string][]int64{"tid": {42}, "pid": {7}}},
			{Location: []*Location{l3, l2, l1}, Value: []int64{1, 10101010}},
			{Value: []int64{0, 0}},
		},
	}
}

// TestReadByPprof writes a profile and reads it back with pprof's own
// package: every field comes back as written.
func TestReadByPprof(t *testing.T) {
	p := sample()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := profile.Parse(&buf)
	if err != nil {
		t.Fatalf("pprof cannot read it: %v", err)
	}
	if err := got.CheckValid(); err != nil {
		t.Fatalf("pprof finds it invalid: %v", err)
	}
	eq := func(what string, a, b any) {
		t.Helper()
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: read %v, wrote %v", what, a, b)
		}
	}
	eq("default sample type", got.DefaultSampleType, p.DefaultSampleType)
	eq("period", got.Period, p.Period)
	eq("time", got.TimeNanos, p.TimeNanos)
	eq("duration", got.DurationNanos, p.DurationNanos)
	eq("comments", got.Comments, p.Comments)
	eq("period type", *got.PeriodType, profile.ValueType{Type: p.PeriodType.Type, Unit: p.PeriodType.Unit})
	if len(got.SampleType) != len(p.SampleType) || len(got.Mapping) != len(p.Mapping) ||
		len(got.Function) != len(p.Function) || len(got.Location) != len(p.Location) || len(got.Sample) != len(p.Sample) {
		t.Fatalf("table sizes differ: %d/%d/%d/%d/%d", len(got.SampleType), len(got.Mapping), len(got.Function), len(got.Location), len(got.Sample))
	}
	for i, st := range p.SampleType {
		eq("sample type", *got.SampleType[i], profile.ValueType{Type: st.Type, Unit: st.Unit})
	}
	for i, m := range p.Mapping {
		g := got.Mapping[i]
		eq("mapping", []any{g.ID, g.Start, g.Limit, g.Offset, g.File, g.BuildID, g.HasFunctions, g.HasFilenames, g.HasLineNumbers, g.HasInlineFrames},
			[]any{m.ID, m.Start, m.Limit, m.Offset, m.File, m.BuildID, m.HasFunctions, m.HasFilenames, m.HasLineNumbers, m.HasInlineFrames})
	}
	for i, f := range p.Function {
		g := got.Function[i]
		eq("function", []any{g.ID, g.Name, g.SystemName, g.Filename, g.StartLine}, []any{f.ID, f.Name, f.SystemName, f.Filename, f.StartLine})
	}
	for i, l := range p.Location {
		g := got.Location[i]
		var gm, wm uint64
		if g.Mapping != nil {
			gm = g.Mapping.ID
		}
		if l.Mapping != nil {
			wm = l.Mapping.ID
		}
		eq("location", []any{g.ID, gm, g.Address, len(g.Line)}, []any{l.ID, wm, l.Address, len(l.Line)})
		for j, ln := range l.Line {
			if j < len(g.Line) {
				gl := g.Line[j]
				eq("line", []any{gl.Function.ID, gl.Line, gl.Column}, []any{ln.Function.ID, ln.Line, ln.Column})
			}
		}
	}
	for i, s := range p.Sample {
		g := got.Sample[i]
		var gids, wids []uint64
		for _, l := range g.Location {
			gids = append(gids, l.ID)
		}
		for _, l := range s.Location {
			wids = append(wids, l.ID)
		}
		eq("sample locations", gids, wids)
		eq("sample values", g.Value, s.Value)
		if len(s.Label) > 0 || len(g.Label) > 0 {
			eq("labels", g.Label, s.Label)
		}
		if len(s.NumLabel) > 0 || len(g.NumLabel) > 0 {
			eq("numeric labels", g.NumLabel, s.NumLabel)
		}
	}
}

// TestSameEncoding: the same profile encodes to the same bytes (labels
// come from maps, whose order varies).
func TestSameEncoding(t *testing.T) {
	a := sample().Encode()
	for range 20 {
		if b := sample().Encode(); !bytes.Equal(a, b) {
			t.Fatal("two encodings of one profile differ")
		}
	}
}

// TestCheck rejects what pprof would reject or misread.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(p *Profile)
		want  string
	}{
		{"values", func(p *Profile) { p.Sample[0].Value = p.Sample[0].Value[:1] }, "values"},
		{"zero mapping id", func(p *Profile) { p.Mapping[1].ID = 0 }, "mapping"},
		{"repeated function id", func(p *Profile) { p.Function[1].ID = 1 }, "function"},
		{"repeated location id", func(p *Profile) { p.Location[1].ID = 1 }, "location"},
		{"foreign mapping", func(p *Profile) { p.Location[0].Mapping = &Mapping{ID: 1} }, "mapping 1"},
		{"foreign function", func(p *Profile) { p.Location[1].Line[0].Function = &Function{ID: 3} }, "function"},
		{"nil function", func(p *Profile) { p.Location[1].Line[0].Function = nil }, "function"},
		{"unlisted location", func(p *Profile) { p.Location = p.Location[:2] }, "location 300"},
		{"nil location", func(p *Profile) { p.Sample[1].Location[0] = nil }, "nil location"},
	} {
		p := sample()
		c.spoil(p)
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Check = %v, want an error with %q", c.name, err, c.want)
		}
	}
}
