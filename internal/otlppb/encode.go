package otlppb

import (
	"encoding/binary"
	"math/bits"
)

// Field numbers of the OTLP profiles proto (collector/profiles/v1development
// and profiles/v1development), and of the common and resource protos.
const (
	// ExportProfilesServiceRequest and ProfilesData.
	reqResourceProfiles, reqDictionary = 1, 2

	// ProfilesDictionary.
	dictMapping, dictLocation, dictFunction, dictLink, dictString, dictAttribute, dictStack = 1, 2, 3, 4, 5, 6, 7

	// ResourceProfiles and Resource.
	rpResource, rpScopeProfiles = 1, 2
	resourceAttributes          = 1

	// ScopeProfiles and InstrumentationScope.
	spScope, spProfiles     = 1, 2
	scopeName, scopeVersion = 1, 2

	// Profile (time_unix_nano is a fixed64).
	profSampleType, profSamples, profTime, profDuration, profPeriodType, profPeriod, profID = 1, 2, 3, 4, 5, 6, 7
	profAttributes                                                                          = 11

	valueTypeType, valueTypeUnit = 1, 2

	sampleStack, sampleAttributes, sampleValues = 1, 2, 4

	mappingStart, mappingLimit, mappingOffset, mappingFilename, mappingAttributes = 1, 2, 3, 4, 5

	locationMapping, locationAddress, locationLines, locationAttributes = 1, 2, 3, 4

	lineFunction, lineLine, lineColumn = 1, 2, 3

	functionName, functionSystemName, functionFilename, functionStartLine = 1, 2, 3, 4

	linkTraceID, linkSpanID = 1, 2

	stackLocations = 1

	// KeyValueAndUnit, KeyValue and AnyValue.
	kvuKey, kvuValue, kvuUnit = 1, 2, 3
	kvKey, kvValue            = 1, 2
	anyString, anyInt         = 1, 3
)

// Encode is p's protobuf encoding as an ExportProfilesServiceRequest
// (uncompressed).
func (p *ProfilesData) Encode() []byte {
	var e encoder
	out := make([]byte, 0, 4096)
	for _, rp := range p.ResourceProfiles {
		out = appendBytes(out, reqResourceProfiles, e.resourceProfiles(rp))
	}
	return appendBytes(out, reqDictionary, e.dictionary(&p.Dictionary))
}

// encoder keeps one scratch buffer per nesting depth, so that a message
// is encoded into its buffer and then copied behind its length by its
// parent, without allocating per message.
type encoder struct {
	res, scope, prof, sample, dict, entry, line []byte
}

func (e *encoder) resourceProfiles(rp *ResourceProfiles) []byte {
	// Resource { repeated KeyValue attributes = 1; }, built in the
	// scope's buffer (free until the scopes are encoded).
	res := e.scope[:0]
	for _, kv := range rp.Resource {
		e.entry = appendKeyValue(e.entry[:0], kv)
		res = appendBytes(res, resourceAttributes, e.entry)
	}
	e.scope = res
	b := appendBytes(e.res[:0], rpResource, res)
	for _, sp := range rp.ScopeProfiles {
		b = appendBytes(b, rpScopeProfiles, e.scopeProfiles(sp))
	}
	e.res = b
	return b
}

func (e *encoder) scopeProfiles(sp *ScopeProfiles) []byte {
	b := e.scope[:0]
	e.entry = appendString(appendString(e.entry[:0], scopeName, sp.Name), scopeVersion, sp.Version)
	b = appendBytes(b, spScope, e.entry)
	for _, pr := range sp.Profiles {
		b = appendBytes(b, spProfiles, e.profile(pr))
	}
	e.scope = b
	return b
}

func (e *encoder) profile(pr *Profile) []byte {
	b := appendBytes(e.prof[:0], profSampleType, appendValueType(e.entry[:0], pr.SampleType))
	for i := range pr.Samples {
		s := &pr.Samples[i]
		m := appendVarintField(e.sample[:0], sampleStack, uint64(s.Stack))
		m = appendPackedInt32s(m, sampleAttributes, s.Attributes)
		m = appendPackedInt64s(m, sampleValues, s.Values)
		e.sample = m
		b = appendBytes(b, profSamples, m)
	}
	if pr.TimeUnixNano != 0 {
		b = appendVarint(b, profTime<<3|1)
		b = binary.LittleEndian.AppendUint64(b, pr.TimeUnixNano)
	}
	b = appendVarintField(b, profDuration, pr.DurationNano)
	b = appendBytes(b, profPeriodType, appendValueType(e.entry[:0], pr.PeriodType))
	b = appendVarintField(b, profPeriod, uint64(pr.Period))
	if pr.ProfileID != ([16]byte{}) {
		b = appendBytes(b, profID, pr.ProfileID[:])
	}
	b = appendPackedInt32s(b, profAttributes, pr.Attributes)
	e.prof = b
	return b
}

func (e *encoder) dictionary(d *Dictionary) []byte {
	b := e.dict[:0]
	for i := range d.Mappings {
		m := &d.Mappings[i]
		x := appendVarintField(e.entry[:0], mappingStart, m.MemoryStart)
		x = appendVarintField(x, mappingLimit, m.MemoryLimit)
		x = appendVarintField(x, mappingOffset, m.FileOffset)
		x = appendVarintField(x, mappingFilename, uint64(m.Filename))
		x = appendPackedInt32s(x, mappingAttributes, m.Attributes)
		e.entry = x
		b = appendBytes(b, dictMapping, x)
	}
	for i := range d.Locations {
		l := &d.Locations[i]
		x := appendVarintField(e.entry[:0], locationMapping, uint64(l.Mapping))
		x = appendVarintField(x, locationAddress, l.Address)
		for _, ln := range l.Lines {
			y := appendVarintField(e.line[:0], lineFunction, uint64(ln.Function))
			y = appendVarintField(y, lineLine, uint64(ln.Line))
			y = appendVarintField(y, lineColumn, uint64(ln.Column))
			e.line = y
			x = appendBytes(x, locationLines, y)
		}
		x = appendPackedInt32s(x, locationAttributes, l.Attributes)
		e.entry = x
		b = appendBytes(b, dictLocation, x)
	}
	for i := range d.Functions {
		f := &d.Functions[i]
		x := appendVarintField(e.entry[:0], functionName, uint64(f.Name))
		x = appendVarintField(x, functionSystemName, uint64(f.SystemName))
		x = appendVarintField(x, functionFilename, uint64(f.Filename))
		x = appendVarintField(x, functionStartLine, uint64(f.StartLine))
		e.entry = x
		b = appendBytes(b, dictFunction, x)
	}
	for i := range d.Links {
		l := &d.Links[i]
		x := e.entry[:0]
		if l.TraceID != ([16]byte{}) {
			x = appendBytes(x, linkTraceID, l.TraceID[:])
		}
		if l.SpanID != ([8]byte{}) {
			x = appendBytes(x, linkSpanID, l.SpanID[:])
		}
		e.entry = x
		b = appendBytes(b, dictLink, x)
	}
	for _, s := range d.Strings {
		b = appendString(appendVarint(b, dictString<<3|2), 0, s)
	}
	for i := range d.Attributes {
		a := &d.Attributes[i]
		x := appendVarintField(e.entry[:0], kvuKey, uint64(a.Key))
		x = appendValueField(x, kvuValue, a.Value)
		x = appendVarintField(x, kvuUnit, uint64(a.Unit))
		e.entry = x
		b = appendBytes(b, dictAttribute, x)
	}
	for i := range d.Stacks {
		e.entry = appendPackedInt32s(e.entry[:0], stackLocations, d.Stacks[i].Locations)
		b = appendBytes(b, dictStack, e.entry)
	}
	e.dict = b
	return b
}

func appendValueType(b []byte, vt ValueType) []byte {
	b = appendVarintField(b, valueTypeType, uint64(vt.Type))
	return appendVarintField(b, valueTypeUnit, uint64(vt.Unit))
}

// appendKeyValue appends the fields of a KeyValue.
func appendKeyValue(b []byte, kv KeyValue) []byte {
	return appendValueField(appendString(b, kvKey, kv.Key), kvValue, kv.Value)
}

// appendValueField appends an AnyValue field, its length computed ahead
// so the value is written in place.
func appendValueField(b []byte, field int, v Value) []byte {
	n := 0
	switch v.Kind {
	case String:
		n = 1 + varintLen(uint64(len(v.Str))) + len(v.Str)
	case Int:
		n = 1 + varintLen(uint64(v.Int))
	}
	b = appendVarint(b, uint64(field)<<3|2)
	b = appendVarint(b, uint64(n))
	return appendValue(b, v)
}

// appendValue appends the fields of an AnyValue.
func appendValue(b []byte, v Value) []byte {
	switch v.Kind {
	case String:
		return appendString(appendVarint(b, anyString<<3|2), 0, v.Str)
	case Int:
		// An int64 of 0 is still a value (a oneof member is written
		// even when zero).
		return appendVarint(appendVarint(b, anyInt<<3), uint64(v.Int))
	}
	return b
}

// The protobuf wire format: a key is field<<3 | wire type (0: varint,
// 1: fixed64, 2: length-delimited); proto3 leaves zero scalars out.

func appendVarint(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

func varintLen(x uint64) int {
	return (bits.Len64(x|1) + 6) / 7
}

func appendVarintField(b []byte, field int, x uint64) []byte {
	if x == 0 {
		return b
	}
	return appendVarint(appendVarint(b, uint64(field)<<3), x)
}

// appendString appends a string field; with field 0, only its length and
// bytes (the key is the caller's).
func appendString(b []byte, field int, s string) []byte {
	if field != 0 {
		if s == "" {
			return b
		}
		b = appendVarint(b, uint64(field)<<3|2)
	}
	b = appendVarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBytes appends a message or bytes field (written even when empty:
// an empty message is still present).
func appendBytes(b []byte, field int, data []byte) []byte {
	b = appendVarint(b, uint64(field)<<3|2)
	b = appendVarint(b, uint64(len(data)))
	return append(b, data...)
}

func appendPackedInt32s(b []byte, field int, xs []int32) []byte {
	if len(xs) == 0 {
		return b
	}
	n := 0
	for _, x := range xs {
		n += varintLen(uint64(x))
	}
	b = appendVarint(b, uint64(field)<<3|2)
	b = appendVarint(b, uint64(n))
	for _, x := range xs {
		b = appendVarint(b, uint64(x))
	}
	return b
}

func appendPackedInt64s(b []byte, field int, xs []int64) []byte {
	if len(xs) == 0 {
		return b
	}
	n := 0
	for _, x := range xs {
		n += varintLen(uint64(x))
	}
	b = appendVarint(b, uint64(field)<<3|2)
	b = appendVarint(b, uint64(n))
	for _, x := range xs {
		b = appendVarint(b, uint64(x))
	}
	return b
}
