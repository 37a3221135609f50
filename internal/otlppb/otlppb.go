// Package otlppb holds an OpenTelemetry profile in the terms of the OTLP
// profiles protocol (ProfilesData: resources, scopes, profiles, samples,
// and the dictionary they share) and writes it as the body of an
// ExportProfilesServiceRequest, the message a Collector receives.
//
// It writes only the fields stackshot fills, with the field numbers of the
// profiles proto the Collector's pdata module v1.71 (pprofile v0.165)
// reads; the tests decode its output with that module and compare it with
// what the module itself builds. It exists so that stackshot, which runs
// once per dump, does not link the module: its package initialisers (a
// feature-gate registry, a JSON library built on reflection) cost every
// run, dump or not, a quarter of a millisecond.
//
// Indexes are the caller's: OTLP's tables are indexed from 0, and entry 0
// of each means "none", so a caller puts an empty entry first in each
// table it uses (the string table starts with ""). Check verifies them.
package otlppb

import "fmt"

// ProfilesData is the whole request (ExportProfilesServiceRequest, whose
// fields are ProfilesData's).
type ProfilesData struct {
	ResourceProfiles []*ResourceProfiles
	Dictionary       Dictionary
}

// Dictionary holds the tables the profiles' samples point into.
type Dictionary struct {
	Mappings   []Mapping
	Locations  []Location
	Functions  []Function
	Links      []Link
	Strings    []string
	Attributes []Attribute
	Stacks     []Stack
}

// Mapping is a mapped file (or region) of the profiled address space.
type Mapping struct {
	MemoryStart, MemoryLimit, FileOffset uint64
	Filename                             int32   // string index
	Attributes                           []int32 // attribute indexes
}

// Location is one address; Lines holds its functions, innermost (inlined)
// first.
type Location struct {
	Mapping    int32 // mapping index
	Address    uint64
	Lines      []Line
	Attributes []int32
}

// Line is a function and source position at a location.
type Line struct {
	Function     int32 // function index
	Line, Column int64
}

// Function is a function's names and file (string indexes).
type Function struct {
	Name, SystemName, Filename int32
	StartLine                  int64
}

// Link ties samples to a trace span; stackshot writes only the empty
// entry 0.
type Link struct {
	TraceID [16]byte
	SpanID  [8]byte
}

// Attribute is an entry of the attribute table (KeyValueAndUnit).
type Attribute struct {
	Key   int32 // string index
	Value Value
	Unit  int32 // string index; 0: none
}

// Value is an attribute's value: a string, a string index or an int64 (the
// AnyValue kinds stackshot writes). The zero Value is an empty one.
type Value struct {
	Kind ValueKind
	Str  string
	Int  int64 // the int, or the string index
}

// ValueKind says which of Value's fields holds the value.
type ValueKind uint8

// The kinds of Value.
const (
	Empty ValueKind = iota
	String
	Int
	StringIndex // a string of the dictionary's table
)

// StringValue makes a string Value.
func StringValue(s string) Value { return Value{Kind: String, Str: s} }

// StringIndexValue makes a Value that is the string table's string i.
func StringIndexValue(i int32) Value { return Value{Kind: StringIndex, Int: int64(i)} }

// IntValue makes an int64 Value.
func IntValue(i int64) Value { return Value{Kind: Int, Int: i} }

// Stack is a sample's locations, leaf first.
type Stack struct {
	Locations []int32
}

// KeyValue is a resource's attribute: its key in full, or as an index
// into the dictionary's string table (KeyIndex, when Key is empty).
type KeyValue struct {
	Key      string
	KeyIndex int32
	Value    Value
}

// InternResources moves the keys and string values of the resources'
// attributes into the string table, as the Collector's own encoder does
// before it writes a request: each becomes the index of its string, found
// by index (the caller's map of the table, kept up to date) or appended.
func (p *ProfilesData) InternResources(index func(string) int32) {
	for _, rp := range p.ResourceProfiles {
		for i := range rp.Resource {
			kv := &rp.Resource[i]
			if kv.Key != "" {
				kv.KeyIndex, kv.Key = index(kv.Key), ""
			}
			if kv.Value.Kind == String {
				kv.Value = StringIndexValue(index(kv.Value.Str))
			}
		}
	}
}

// ResourceProfiles is one resource (a process) and its scopes.
type ResourceProfiles struct {
	Resource      []KeyValue // the resource's attributes
	ScopeProfiles []*ScopeProfiles
}

// ScopeProfiles is the profiles one instrumentation scope produced.
type ScopeProfiles struct {
	Name, Version string // the scope's
	Profiles      []*Profile
}

// Profile is one sample type's samples.
type Profile struct {
	SampleType   ValueType
	Samples      []Sample
	TimeUnixNano uint64
	DurationNano uint64
	PeriodType   ValueType
	Period       int64
	ProfileID    [16]byte
	Attributes   []int32
}

// ValueType is a type and its unit (string indexes).
type ValueType struct {
	Type, Unit int32
}

// Sample is a stack and its values.
type Sample struct {
	Stack      int32 // stack index
	Attributes []int32
	Values     []int64
}

// Check reports the first index that points outside its table.
func (p *ProfilesData) Check() error {
	d := &p.Dictionary
	str := func(what string, i int32) error {
		if i < 0 || int(i) >= len(d.Strings) {
			return fmt.Errorf("%s: string index %d out of %d", what, i, len(d.Strings))
		}
		return nil
	}
	attrs := func(what string, idx []int32) error {
		for _, i := range idx {
			if i < 0 || int(i) >= len(d.Attributes) {
				return fmt.Errorf("%s: attribute index %d out of %d", what, i, len(d.Attributes))
			}
		}
		return nil
	}
	idx := func(what string, i int32, n int) error {
		if i < 0 || int(i) >= n {
			return fmt.Errorf("%s: index %d out of %d", what, i, n)
		}
		return nil
	}
	var first error
	add := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, m := range d.Mappings {
		add(str("mapping file", m.Filename))
		add(attrs("mapping", m.Attributes))
	}
	for _, l := range d.Locations {
		add(idx("location mapping", l.Mapping, len(d.Mappings)))
		add(attrs("location", l.Attributes))
		for _, ln := range l.Lines {
			add(idx("line function", ln.Function, len(d.Functions)))
		}
	}
	for _, f := range d.Functions {
		add(str("function name", f.Name))
		add(str("function system name", f.SystemName))
		add(str("function file", f.Filename))
	}
	for _, a := range d.Attributes {
		add(str("attribute key", a.Key))
		add(str("attribute unit", a.Unit))
	}
	for _, s := range d.Stacks {
		for _, l := range s.Locations {
			add(idx("stack location", l, len(d.Locations)))
		}
	}
	for _, rp := range p.ResourceProfiles {
		for _, kv := range rp.Resource {
			add(str("resource attribute key", kv.KeyIndex))
			if kv.Value.Kind == StringIndex {
				add(idx("resource attribute value", int32(kv.Value.Int), len(d.Strings)))
			}
		}
		for _, sp := range rp.ScopeProfiles {
			for _, pr := range sp.Profiles {
				add(str("sample type", pr.SampleType.Type))
				add(str("sample unit", pr.SampleType.Unit))
				add(str("period type", pr.PeriodType.Type))
				add(str("period unit", pr.PeriodType.Unit))
				add(attrs("profile", pr.Attributes))
				for _, s := range pr.Samples {
					add(idx("sample stack", s.Stack, len(d.Stacks)))
					add(attrs("sample", s.Attributes))
				}
			}
		}
	}
	return first
}
