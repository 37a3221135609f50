package otlppb

import (
	"encoding/binary"
	"stackshot/internal/pbwire"
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
	kvuKey, kvuValue, kvuUnit         = 1, 2, 3
	kvKey, kvValue, kvKeyIndex        = 1, 2, 3
	anyString, anyInt, anyStringIndex = 1, 3, 8
)

// Encode is p's protobuf encoding as an ExportProfilesServiceRequest
// (uncompressed).
func (p *ProfilesData) Encode() []byte {
	e := encoder{b: make([]byte, 0, p.sizeHint())}
	for _, rp := range p.ResourceProfiles {
		at := e.open(reqResourceProfiles)
		e.resourceProfiles(rp)
		e.close(at)
	}
	at := e.open(reqDictionary)
	e.dictionary(&p.Dictionary)
	e.close(at)
	return e.b
}

// sizeHint guesses the encoding's size from its biggest parts, so that
// the buffer seldom grows.
func (p *ProfilesData) sizeHint() int {
	d := &p.Dictionary
	n := 64 + 16*len(d.Locations) + 8*len(d.Functions) + 8*len(d.Stacks) + 8*len(d.Attributes) + 24*len(d.Mappings)
	for _, s := range d.Strings {
		n += 2 + len(s)
	}
	for _, st := range d.Stacks {
		n += 2 * len(st.Locations)
	}
	for _, rp := range p.ResourceProfiles {
		for _, sp := range rp.ScopeProfiles {
			for _, pr := range sp.Profiles {
				n += 64 + 16*len(pr.Samples)
			}
		}
	}
	return n
}

// encoder writes a message into one buffer: a nested message is written
// in place behind room for the longest length it can have (open), and
// moved back over the room its length did not take (close).
type encoder struct {
	b []byte
}

// lenRoom is the room left for a length: 5 varint bytes hold any length
// below 32 GiB (protobuf messages stay below 2 GiB).
const lenRoom = 5

// open starts a length-delimited field and returns where its content
// starts, for close.
func (e *encoder) open(field int) int {
	e.b = binary.AppendUvarint(e.b, uint64(field)<<3|2)
	e.b = append(e.b, make([]byte, lenRoom)...)
	return len(e.b)
}

// close ends the field open started at at: writes its length and moves
// its content behind it.
func (e *encoder) close(at int) {
	n := len(e.b) - at
	l := binary.AppendUvarint(e.b[at-lenRoom:at-lenRoom], uint64(n))
	copy(e.b[at-lenRoom+len(l):], e.b[at:])
	e.b = e.b[:at-lenRoom+len(l)+n]
}

func (e *encoder) resourceProfiles(rp *ResourceProfiles) {
	// Resource { repeated KeyValue attributes = 1; }
	at := e.open(rpResource)
	for _, kv := range rp.Resource {
		a := e.open(resourceAttributes)
		e.b = appendKeyValue(e.b, kv)
		e.close(a)
	}
	e.close(at)
	for _, sp := range rp.ScopeProfiles {
		at := e.open(rpScopeProfiles)
		e.scopeProfiles(sp)
		e.close(at)
	}
}

func (e *encoder) scopeProfiles(sp *ScopeProfiles) {
	at := e.open(spScope)
	e.b = pbwire.AppendString(pbwire.AppendString(e.b, scopeName, sp.Name), scopeVersion, sp.Version)
	e.close(at)
	for _, pr := range sp.Profiles {
		at := e.open(spProfiles)
		e.profile(pr)
		e.close(at)
	}
}

func (e *encoder) profile(pr *Profile) {
	e.valueType(profSampleType, pr.SampleType)
	for i := range pr.Samples {
		s := &pr.Samples[i]
		at := e.open(profSamples)
		b := pbwire.AppendVarintField(e.b, sampleStack, uint64(s.Stack))
		b = pbwire.AppendPacked(b, sampleAttributes, s.Attributes)
		e.b = pbwire.AppendPacked(b, sampleValues, s.Values)
		e.close(at)
	}
	b := e.b
	if pr.TimeUnixNano != 0 {
		b = binary.AppendUvarint(b, profTime<<3|1)
		b = binary.LittleEndian.AppendUint64(b, pr.TimeUnixNano)
	}
	e.b = pbwire.AppendVarintField(b, profDuration, pr.DurationNano)
	e.valueType(profPeriodType, pr.PeriodType)
	b = pbwire.AppendVarintField(e.b, profPeriod, uint64(pr.Period))
	if pr.ProfileID != ([16]byte{}) {
		b = pbwire.AppendBytes(b, profID, pr.ProfileID[:])
	}
	e.b = pbwire.AppendPacked(b, profAttributes, pr.Attributes)
}

func (e *encoder) valueType(field int, vt ValueType) {
	at := e.open(field)
	e.b = pbwire.AppendVarintField(e.b, valueTypeType, uint64(vt.Type))
	e.b = pbwire.AppendVarintField(e.b, valueTypeUnit, uint64(vt.Unit))
	e.close(at)
}

func (e *encoder) dictionary(d *Dictionary) {
	for i := range d.Mappings {
		m := &d.Mappings[i]
		at := e.open(dictMapping)
		b := pbwire.AppendVarintField(e.b, mappingStart, m.MemoryStart)
		b = pbwire.AppendVarintField(b, mappingLimit, m.MemoryLimit)
		b = pbwire.AppendVarintField(b, mappingOffset, m.FileOffset)
		b = pbwire.AppendVarintField(b, mappingFilename, uint64(m.Filename))
		e.b = pbwire.AppendPacked(b, mappingAttributes, m.Attributes)
		e.close(at)
	}
	for i := range d.Locations {
		l := &d.Locations[i]
		at := e.open(dictLocation)
		e.b = pbwire.AppendVarintField(e.b, locationMapping, uint64(l.Mapping))
		e.b = pbwire.AppendVarintField(e.b, locationAddress, l.Address)
		for _, ln := range l.Lines {
			a := e.open(locationLines)
			b := pbwire.AppendVarintField(e.b, lineFunction, uint64(ln.Function))
			b = pbwire.AppendVarintField(b, lineLine, uint64(ln.Line))
			e.b = pbwire.AppendVarintField(b, lineColumn, uint64(ln.Column))
			e.close(a)
		}
		e.b = pbwire.AppendPacked(e.b, locationAttributes, l.Attributes)
		e.close(at)
	}
	for i := range d.Functions {
		f := &d.Functions[i]
		at := e.open(dictFunction)
		b := pbwire.AppendVarintField(e.b, functionName, uint64(f.Name))
		b = pbwire.AppendVarintField(b, functionSystemName, uint64(f.SystemName))
		b = pbwire.AppendVarintField(b, functionFilename, uint64(f.Filename))
		e.b = pbwire.AppendVarintField(b, functionStartLine, uint64(f.StartLine))
		e.close(at)
	}
	for i := range d.Links {
		l := &d.Links[i]
		at := e.open(dictLink)
		if l.TraceID != ([16]byte{}) {
			e.b = pbwire.AppendBytes(e.b, linkTraceID, l.TraceID[:])
		}
		if l.SpanID != ([8]byte{}) {
			e.b = pbwire.AppendBytes(e.b, linkSpanID, l.SpanID[:])
		}
		e.close(at)
	}
	for _, s := range d.Strings {
		e.b = pbwire.AppendString(binary.AppendUvarint(e.b, dictString<<3|2), 0, s)
	}
	for i := range d.Attributes {
		a := &d.Attributes[i]
		at := e.open(dictAttribute)
		b := pbwire.AppendVarintField(e.b, kvuKey, uint64(a.Key))
		b = appendValueField(b, kvuValue, a.Value)
		e.b = pbwire.AppendVarintField(b, kvuUnit, uint64(a.Unit))
		e.close(at)
	}
	for i := range d.Stacks {
		at := e.open(dictStack)
		e.b = pbwire.AppendPacked(e.b, stackLocations, d.Stacks[i].Locations)
		e.close(at)
	}
}

// appendKeyValue appends the fields of a KeyValue.
func appendKeyValue(b []byte, kv KeyValue) []byte {
	b = appendValueField(pbwire.AppendString(b, kvKey, kv.Key), kvValue, kv.Value)
	return pbwire.AppendVarintField(b, kvKeyIndex, uint64(kv.KeyIndex))
}

// appendValueField appends an AnyValue field, its length computed ahead
// so the value is written in place.
func appendValueField(b []byte, field int, v Value) []byte {
	n := 0
	switch v.Kind {
	case String:
		n = 1 + pbwire.VarintLen(uint64(len(v.Str))) + len(v.Str)
	case Int, StringIndex:
		n = 1 + pbwire.VarintLen(uint64(v.Int))
	}
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	b = binary.AppendUvarint(b, uint64(n))
	return appendValue(b, v)
}

// appendValue appends the fields of an AnyValue.
func appendValue(b []byte, v Value) []byte {
	switch v.Kind {
	case String:
		return pbwire.AppendString(binary.AppendUvarint(b, anyString<<3|2), 0, v.Str)
	case Int:
		// An int64 of 0 is still a value (a oneof member is written
		// even when zero).
		return binary.AppendUvarint(binary.AppendUvarint(b, anyInt<<3), uint64(v.Int))
	case StringIndex:
		return binary.AppendUvarint(binary.AppendUvarint(b, anyStringIndex<<3), uint64(v.Int))
	}
	return b
}
