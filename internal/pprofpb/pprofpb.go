// Package pprofpb holds a profile in the pprof format's terms (the
// messages of profile.proto: samples, mappings, locations, functions) and
// writes it as `go tool pprof` reads it: the protobuf encoding, gzipped.
//
// It writes only; the tests read its output back with pprof's own
// package. It exists so that stackshot, which runs once per dump, does
// not link a profile library whose package initialisation (compiling
// regular expressions for the legacy formats it parses) costs every run,
// dump or not, a tenth of a millisecond and more.
//
// The types mirror the fields stackshot writes; IDs are the caller's,
// checked by Check. Strings are interned into the string table in the
// order they are met, "" first, as the format requires.
package pprofpb

import (
	"compress/gzip"
	"fmt"
	"io"
	"sort"
	"stackshot/internal/pbwire"
)

// Profile is the top-level message (profile.proto's Profile).
type Profile struct {
	SampleType        []*ValueType
	DefaultSampleType string
	Sample            []*Sample
	Mapping           []*Mapping
	Location          []*Location
	Function          []*Function
	Comments          []string
	TimeNanos         int64
	DurationNanos     int64
	PeriodType        *ValueType
	Period            int64
}

// ValueType is a sample value's type and unit ("cpu", "nanoseconds").
type ValueType struct {
	Type, Unit string
}

// Sample is one stack (Location[0] is the leaf) with its values, one per
// SampleType, and its labels.
type Sample struct {
	Location []*Location
	Value    []int64
	Label    map[string][]string
	NumLabel map[string][]int64
}

// Mapping is a mapped file (or region) of the profiled address space.
type Mapping struct {
	ID                                                          uint64
	Start, Limit, Offset                                        uint64
	File, BuildID                                               string
	HasFunctions, HasFilenames, HasLineNumbers, HasInlineFrames bool
}

// Location is one address; Line holds its functions, innermost (inlined)
// first.
type Location struct {
	ID      uint64
	Mapping *Mapping
	Address uint64
	Line    []Line
}

// Line is a function and source line at a location.
type Line struct {
	Function *Function
	Line     int64
	Column   int64
}

// Function is a function's names and file.
type Function struct {
	ID                         uint64
	Name, SystemName, Filename string
	StartLine                  int64
}

// Check reports the first inconsistency that would make pprof reject or
// misread the profile: values not matching the sample types, nil or
// zero-ID entries, duplicate IDs, references to entries not in the
// profile's tables.
func (p *Profile) Check() error {
	for _, s := range p.Sample {
		if s == nil {
			return fmt.Errorf("nil sample")
		}
		if len(s.Value) != len(p.SampleType) {
			return fmt.Errorf("a sample has %d values for %d sample types", len(s.Value), len(p.SampleType))
		}
		for _, l := range s.Location {
			if l == nil {
				return fmt.Errorf("a sample has a nil location")
			}
		}
	}
	maps := make(map[uint64]*Mapping, len(p.Mapping))
	for _, m := range p.Mapping {
		if m == nil || m.ID == 0 || maps[m.ID] != nil {
			return fmt.Errorf("mapping with a nil, zero or repeated id")
		}
		maps[m.ID] = m
	}
	fns := make(map[uint64]*Function, len(p.Function))
	for _, f := range p.Function {
		if f == nil || f.ID == 0 || fns[f.ID] != nil {
			return fmt.Errorf("function with a nil, zero or repeated id")
		}
		fns[f.ID] = f
	}
	locs := make(map[uint64]bool, len(p.Location))
	for _, l := range p.Location {
		if l == nil || l.ID == 0 || locs[l.ID] {
			return fmt.Errorf("location with a nil, zero or repeated id")
		}
		locs[l.ID] = true
		if l.Mapping != nil && maps[l.Mapping.ID] != l.Mapping {
			return fmt.Errorf("location %d: mapping %d is not the profile's", l.ID, l.Mapping.ID)
		}
		for _, ln := range l.Line {
			if ln.Function == nil || fns[ln.Function.ID] != ln.Function {
				return fmt.Errorf("location %d: a line's function is not the profile's", l.ID)
			}
		}
	}
	for _, s := range p.Sample {
		for _, l := range s.Location {
			if !locs[l.ID] {
				return fmt.Errorf("a sample's location %d is not the profile's", l.ID)
			}
		}
	}
	return nil
}

// Write writes p gzipped, as `go tool pprof` reads it.
func (p *Profile) Write(w io.Writer) error {
	zw := gzip.NewWriter(w)
	if _, err := zw.Write(p.Encode()); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}

// Field numbers of profile.proto.
const (
	profSampleType, profSample, profMapping, profLocation, profFunction, profStringTable             = 1, 2, 3, 4, 5, 6
	profTimeNanos, profDurationNanos, profPeriodType, profPeriod, profComment, profDefaultSampleType = 9, 10, 11, 12, 13, 14

	valueType, valueUnit = 1, 2

	sampleLocationID, sampleValue, sampleLabel = 1, 2, 3

	labelKey, labelStr, labelNum = 1, 2, 3

	mappingID, mappingStart, mappingLimit, mappingOffset, mappingFile, mappingBuildID = 1, 2, 3, 4, 5, 6
	mappingHasFunctions, mappingHasFilenames, mappingHasLines, mappingHasInline       = 7, 8, 9, 10

	locationID, locationMappingID, locationAddress, locationLine = 1, 2, 3, 4

	lineFunctionID, lineLine, lineColumn = 1, 2, 3

	functionID, functionName, functionSystemName, functionFilename, functionStartLine = 1, 2, 3, 4, 5
)

// Encode is p's protobuf encoding (uncompressed).
func (p *Profile) Encode() []byte {
	e := encoder{strings: map[string]int64{"": 0}, table: []string{""}}
	var out, msg []byte
	// Each message is encoded into msg, then copied behind its length.
	put := func(field int, m []byte) []byte {
		out = pbwire.AppendBytes(out, field, m)
		return m[:0]
	}
	for _, vt := range p.SampleType {
		msg = put(profSampleType, e.valueType(msg, vt))
	}
	for _, smp := range p.Sample {
		msg = put(profSample, e.sample(msg, smp))
	}
	for _, m := range p.Mapping {
		msg = pbwire.AppendVarintField(msg, mappingID, m.ID)
		msg = pbwire.AppendVarintField(msg, mappingStart, m.Start)
		msg = pbwire.AppendVarintField(msg, mappingLimit, m.Limit)
		msg = pbwire.AppendVarintField(msg, mappingOffset, m.Offset)
		msg = pbwire.AppendVarintField(msg, mappingFile, uint64(e.str(m.File)))
		msg = pbwire.AppendVarintField(msg, mappingBuildID, uint64(e.str(m.BuildID)))
		msg = pbwire.AppendBoolField(msg, mappingHasFunctions, m.HasFunctions)
		msg = pbwire.AppendBoolField(msg, mappingHasFilenames, m.HasFilenames)
		msg = pbwire.AppendBoolField(msg, mappingHasLines, m.HasLineNumbers)
		msg = pbwire.AppendBoolField(msg, mappingHasInline, m.HasInlineFrames)
		msg = put(profMapping, msg)
	}
	var lm []byte
	for _, l := range p.Location {
		msg = pbwire.AppendVarintField(msg, locationID, l.ID)
		if l.Mapping != nil {
			msg = pbwire.AppendVarintField(msg, locationMappingID, l.Mapping.ID)
		}
		msg = pbwire.AppendVarintField(msg, locationAddress, l.Address)
		for _, ln := range l.Line {
			lm = lm[:0]
			if ln.Function != nil {
				lm = pbwire.AppendVarintField(lm, lineFunctionID, ln.Function.ID)
			}
			lm = pbwire.AppendVarintField(lm, lineLine, uint64(ln.Line))
			lm = pbwire.AppendVarintField(lm, lineColumn, uint64(ln.Column))
			msg = pbwire.AppendBytes(msg, locationLine, lm)
		}
		msg = put(profLocation, msg)
	}
	for _, f := range p.Function {
		msg = pbwire.AppendVarintField(msg, functionID, f.ID)
		msg = pbwire.AppendVarintField(msg, functionName, uint64(e.str(f.Name)))
		msg = pbwire.AppendVarintField(msg, functionSystemName, uint64(e.str(f.SystemName)))
		msg = pbwire.AppendVarintField(msg, functionFilename, uint64(e.str(f.Filename)))
		msg = pbwire.AppendVarintField(msg, functionStartLine, uint64(f.StartLine))
		msg = put(profFunction, msg)
	}
	// The remaining strings, then the table itself.
	comments := make([]int64, len(p.Comments))
	for i, c := range p.Comments {
		comments[i] = e.str(c)
	}
	var period []byte
	if pt := p.PeriodType; pt != nil {
		period = e.valueType(nil, pt)
	}
	defaultType := e.str(p.DefaultSampleType)
	for _, s := range e.table {
		out = pbwire.AppendBytes(out, profStringTable, []byte(s))
	}
	out = pbwire.AppendVarintField(out, profTimeNanos, uint64(p.TimeNanos))
	out = pbwire.AppendVarintField(out, profDurationNanos, uint64(p.DurationNanos))
	if len(period) > 0 {
		out = pbwire.AppendBytes(out, profPeriodType, period)
	}
	out = pbwire.AppendVarintField(out, profPeriod, uint64(p.Period))
	out = pbwire.AppendPacked(out, profComment, comments)
	out = pbwire.AppendVarintField(out, profDefaultSampleType, uint64(defaultType))
	return out
}

// sample appends the encoding of sample s to msg.
func (e *encoder) sample(msg []byte, s *Sample) []byte {
	ids := make([]uint64, 0, len(s.Location))
	for _, l := range s.Location {
		ids = append(ids, l.ID)
	}
	msg = pbwire.AppendPacked(msg, sampleLocationID, ids)
	msg = pbwire.AppendPacked(msg, sampleValue, s.Value)
	// Labels in key order, string labels first (as pprof writes them),
	// so the same profile encodes the same.
	for _, k := range sortedKeys(nil, s.Label) {
		for _, v := range s.Label[k] {
			var lb []byte
			lb = pbwire.AppendVarintField(lb, labelKey, uint64(e.str(k)))
			lb = pbwire.AppendVarintField(lb, labelStr, uint64(e.str(v)))
			msg = pbwire.AppendBytes(msg, sampleLabel, lb)
		}
	}
	for _, k := range sortedKeys(nil, s.NumLabel) {
		for _, v := range s.NumLabel[k] {
			var lb []byte
			lb = pbwire.AppendVarintField(lb, labelKey, uint64(e.str(k)))
			lb = pbwire.AppendVarintField(lb, labelNum, uint64(v))
			msg = pbwire.AppendBytes(msg, sampleLabel, lb)
		}
	}
	return msg
}

// encoder interns strings.
type encoder struct {
	strings map[string]int64
	table   []string
}

func (e *encoder) str(s string) int64 {
	if i, ok := e.strings[s]; ok {
		return i
	}
	i := int64(len(e.table))
	e.strings[s] = i
	e.table = append(e.table, s)
	return i
}

func (e *encoder) valueType(b []byte, vt *ValueType) []byte {
	b = pbwire.AppendVarintField(b, valueType, uint64(e.str(vt.Type)))
	return pbwire.AppendVarintField(b, valueUnit, uint64(e.str(vt.Unit)))
}

func sortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
