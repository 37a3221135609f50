package goruntime

import (
	"debug/dwarf"
	"fmt"
	"stackshot/internal/contain"
	"strings"
)

// Layout is where the fields the goroutine reader needs lie in one Go
// release's runtime structures (byte offsets; -1 when the release has no
// such field), with the runtime's own words for goroutine statuses and
// wait reasons, indexed by their values.
type Layout struct {
	Release string // "go1.26": layouts are per release series

	// runtime.g
	GStackLo, GStackHi        int
	GSchedSP, GSchedPC        int
	GSchedBP                  int
	GSyscallSP, GSyscallPC    int
	GM                        int
	GAtomicStatus             int
	GGoid                     int
	GWaitSince, GWaitReason   int
	GGoPC, GStartPC           int
	GParentGoid               int // -1 before Go 1.21
	GSize                     int
	MProcID                   int // runtime.m
	MDPcHeader, MDFuncnametab int // runtime.moduledata: pointer, slices
	MDPctab, MDPclntable      int
	MDFtab                    int
	MDMinPC, MDMaxPC, MDText  int
	MDBss, MDEbss             int
	MDNoptrbss, MDEnoptrbss   int
	FuncEntryOff, FuncNameOff int // runtime._func
	FuncPcsp                  int
	FuncFuncID                int // _func.funcID (a byte)
	// FuncIDWrapper is the funcID of compiler-generated wrappers, which
	// the runtime's tracebacks leave out.
	FuncIDWrapper int

	Statuses    []string // gStatusStrings
	WaitReasons []string // waitReasonStrings
}

// Release returns the release series of a Go version ("go1.26.8" and
// "go1.26rc1" are "go1.26"); "" when v is not a Go version.
func Release(v string) string {
	if !strings.HasPrefix(v, "go1.") {
		return ""
	}
	rest := v[len("go1."):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 {
		return ""
	}
	return v[:len("go1.")+n]
}

// KnownLayout returns the table's layout for a Go version's release.
func KnownLayout(version string) (*Layout, bool) {
	l, ok := knownLayouts()[Release(version)]
	if !ok {
		return nil, false
	}
	return &l, true
}

// Releases lists the releases the table knows.
func Releases() []string {
	var out []string
	for r := range knownLayouts() {
		out = append(out, r)
	}
	return out
}

// offsetField names one offset of a Layout: the DWARF struct, the member
// path (dot-separated; alternatives separated by |) and where it goes.
type offsetField struct {
	typ, path string
	dst       func(*Layout) *int
	optional  bool
}

var offsetFields = []offsetField{
	{"runtime.g", "stack.lo", func(l *Layout) *int { return &l.GStackLo }, false},
	{"runtime.g", "stack.hi", func(l *Layout) *int { return &l.GStackHi }, false},
	{"runtime.g", "sched.sp", func(l *Layout) *int { return &l.GSchedSP }, false},
	{"runtime.g", "sched.pc", func(l *Layout) *int { return &l.GSchedPC }, false},
	{"runtime.g", "sched.bp", func(l *Layout) *int { return &l.GSchedBP }, false},
	{"runtime.g", "syscallsp", func(l *Layout) *int { return &l.GSyscallSP }, false},
	{"runtime.g", "syscallpc", func(l *Layout) *int { return &l.GSyscallPC }, false},
	{"runtime.g", "m", func(l *Layout) *int { return &l.GM }, false},
	{"runtime.g", "atomicstatus", func(l *Layout) *int { return &l.GAtomicStatus }, false},
	{"runtime.g", "goid", func(l *Layout) *int { return &l.GGoid }, false},
	{"runtime.g", "waitsince", func(l *Layout) *int { return &l.GWaitSince }, false},
	{"runtime.g", "waitreason", func(l *Layout) *int { return &l.GWaitReason }, false},
	{"runtime.g", "gopc", func(l *Layout) *int { return &l.GGoPC }, false},
	{"runtime.g", "startpc", func(l *Layout) *int { return &l.GStartPC }, false},
	{"runtime.g", "parentGoid", func(l *Layout) *int { return &l.GParentGoid }, true},
	{"runtime.m", "procid", func(l *Layout) *int { return &l.MProcID }, false},
	{"runtime.moduledata", "pcHeader", func(l *Layout) *int { return &l.MDPcHeader }, false},
	{"runtime.moduledata", "funcnametab", func(l *Layout) *int { return &l.MDFuncnametab }, false},
	{"runtime.moduledata", "pctab", func(l *Layout) *int { return &l.MDPctab }, false},
	{"runtime.moduledata", "pclntable", func(l *Layout) *int { return &l.MDPclntable }, false},
	{"runtime.moduledata", "ftab", func(l *Layout) *int { return &l.MDFtab }, false},
	{"runtime.moduledata", "minpc", func(l *Layout) *int { return &l.MDMinPC }, false},
	{"runtime.moduledata", "maxpc", func(l *Layout) *int { return &l.MDMaxPC }, false},
	{"runtime.moduledata", "text", func(l *Layout) *int { return &l.MDText }, false},
	{"runtime.moduledata", "bss", func(l *Layout) *int { return &l.MDBss }, false},
	{"runtime.moduledata", "ebss", func(l *Layout) *int { return &l.MDEbss }, false},
	{"runtime.moduledata", "noptrbss", func(l *Layout) *int { return &l.MDNoptrbss }, false},
	{"runtime.moduledata", "enoptrbss", func(l *Layout) *int { return &l.MDEnoptrbss }, false},
	{"runtime._func", "entryOff|entryoff", func(l *Layout) *int { return &l.FuncEntryOff }, false},
	{"runtime._func", "nameOff|nameoff", func(l *Layout) *int { return &l.FuncNameOff }, false},
	{"runtime._func", "pcsp", func(l *Layout) *int { return &l.FuncPcsp }, false},
	{"runtime._func", "funcID", func(l *Layout) *int { return &l.FuncFuncID }, false},
}

// maxDWARFEntries bounds the entries read while looking for the runtime's
// types.
const maxDWARFEntries = 1 << 22

// LayoutFromDWARF reads the offsets of a Layout from a Go binary's DWARF
// (the runtime's struct types). Statuses and wait reasons are not in
// DWARF: the caller fills them in.
func LayoutFromDWARF(d *dwarf.Data) (l *Layout, err error) {
	if perr := contain.Do("reading runtime types from DWARF", func() error {
		l, err = layoutFromDWARF(d)
		return nil
	}); perr != nil {
		return nil, perr
	}
	return l, err
}

func layoutFromDWARF(d *dwarf.Data) (l *Layout, err error) {
	want := map[string]*dwarf.StructType{"runtime.g": nil, "runtime.m": nil, "runtime.moduledata": nil, "runtime._func": nil}
	found := 0
	r := d.Reader()
	for n := 0; n < maxDWARFEntries && found < len(want); n++ {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("reading DWARF: %w", err)
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit {
			// The linker puts the runtime's types in its unit.
			if name, _ := e.Val(dwarf.AttrName).(string); name != "runtime" {
				r.SkipChildren()
			}
			continue
		}
		if e.Tag != dwarf.TagStructType {
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		if st, ok := want[name]; !ok || st != nil {
			continue
		}
		t, err := d.Type(e.Offset)
		if err != nil {
			return nil, fmt.Errorf("reading DWARF type %s: %w", name, err)
		}
		st, ok := t.(*dwarf.StructType)
		if !ok {
			continue
		}
		want[name] = st
		found++
	}
	for n, st := range want {
		if st == nil {
			return nil, fmt.Errorf("DWARF has no type %s", n)
		}
	}
	l = &Layout{GSize: int(want["runtime.g"].ByteSize), FuncIDWrapper: -1}
	for _, f := range offsetFields {
		off, ok := memberOffset(want[f.typ], f.path)
		if !ok {
			if !f.optional {
				return nil, fmt.Errorf("DWARF type %s has no field %s", f.typ, f.path)
			}
			off = -1
		}
		*f.dst(l) = off
	}
	return l, nil
}

// memberOffset returns the offset of a dotted member path in st.
func memberOffset(st *dwarf.StructType, path string) (int, bool) {
	for _, alt := range strings.Split(path, "|") {
		if off, ok := memberPath(st, strings.Split(alt, ".")); ok {
			return off, true
		}
	}
	return 0, false
}

func memberPath(st *dwarf.StructType, parts []string) (int, bool) {
	off := 0
	for i, p := range parts {
		var fld *dwarf.StructField
		for _, f := range st.Field {
			if f.Name == p {
				fld = f
				break
			}
		}
		if fld == nil {
			return 0, false
		}
		off += int(fld.ByteOffset)
		if i == len(parts)-1 {
			return off, true
		}
		t := fld.Type
		for {
			td, ok := t.(*dwarf.TypedefType)
			if !ok {
				break
			}
			t = td.Type
		}
		next, ok := t.(*dwarf.StructType)
		if !ok {
			return 0, false
		}
		st = next
	}
	return 0, false
}

// check rejects a layout whose offsets cannot be right: a table entry or
// DWARF from a hostile binary must not send reads anywhere.
func (l *Layout) check() error {
	for _, f := range offsetFields {
		v := *f.dst(l)
		if v == -1 && f.optional {
			continue
		}
		if v < 0 || v > 1<<16 {
			return fmt.Errorf("runtime layout: %s.%s at %d", f.typ, f.path, v)
		}
	}
	if l.GSize <= 0 || l.GSize > 1<<16 {
		return fmt.Errorf("runtime layout: g size %d", l.GSize)
	}
	for _, o := range []int{l.FuncEntryOff, l.FuncNameOff, l.FuncPcsp, l.FuncFuncID} {
		if o+4 > funcHeaderRead {
			return fmt.Errorf("runtime layout: _func field at %d", o)
		}
	}
	for _, o := range []int{l.GStackLo, l.GStackHi, l.GSchedSP, l.GSchedPC, l.GSchedBP, l.GSyscallSP, l.GSyscallPC,
		l.GM, l.GAtomicStatus, l.GGoid, l.GWaitSince, l.GWaitReason, l.GGoPC, l.GStartPC, l.GParentGoid} {
		if o+8 > l.GSize {
			return fmt.Errorf("runtime layout: g field at %d beyond the g's %d bytes", o, l.GSize)
		}
	}
	return nil
}

//go:generate go run ./gen -o layouts.go /usr/lib/go-1.19/bin/go GOTOOLCHAIN=go1.20.14:go GOTOOLCHAIN=go1.21.13:go GOTOOLCHAIN=go1.22.12:go GOTOOLCHAIN=go1.23.12:go GOTOOLCHAIN=go1.24.0:go GOTOOLCHAIN=go1.25.0:go go GOTOOLCHAIN=go1.27.3:go
