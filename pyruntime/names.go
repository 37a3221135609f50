package pyruntime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// CPython before 3.14 never names a thread for the system: every thread of
// a Python program is "python3" to /proc. The name its program gave it is
// the threading module's: threading._active maps each thread's ident (its
// pthread_t, a thread state's thread_id) to its Thread object, whose _name
// attribute is the name. Names reads them: sys.modules (the interpreter's
// modules dict) → "threading" → its md_dict → "_active" → each Thread's
// instance attributes → "_name". Everything on the way is the target's and
// hostile: each object is checked against its type, each dict bounded.

// Bounds on what Names reads.
const (
	// MaxName bounds a thread's name (bytes of UTF-8): a longer one is
	// cut there, at a character's boundary.
	MaxName = 256
	// maxDictEntries bounds the entries of a dict read (sys.modules, a
	// module's globals, _active, an instance's attributes).
	maxDictEntries = 4096
	// maxDictLog2 bounds the hash table of a dict read (entries are at
	// most two thirds of it).
	maxDictLog2 = 14
	// maxLongDigits: an ident is a pthread_t, 64 bits, 3 digits of 30.
	maxLongDigits = 3
	// namesBudget bounds the dict entries one read of the names visits,
	// all dicts together (a few hundred in a real process; _active's
	// 4096 threads each with 4096 attributes would be 16 million).
	namesBudget = 1 << 16
)

// splitKey is a key name of the shared keys at dk (reader.splitAt).
type splitKey struct {
	dk   uint64
	name string
}

// errNotFound: the dict has no such key.
var errNotFound = errors.New("not found")

// Names fills in the Name of each of threads (as Threads read them) that
// its interpreter's threading._active holds. The threading module not
// imported, or no _active in it: no names, and no error. An error is a
// structure that did not check out (a moving one is read again a few
// times): no thread is named then, never a half-read guess.
func (rt *Runtime) Names(threads []Thread) error {
	if rt.modType == 0 || rt.dictType == 0 || rt.longType == 0 {
		return errors.New("the interpreter's module has no PyModule_Type, PyDict_Type or PyLong_Type symbol")
	}
	var err error
	for try := 0; try < readTries; try++ {
		var names map[uint64]map[uint64]string
		if names, err = rt.names(); err == nil {
			for i := range threads {
				t := &threads[i]
				t.Name = names[t.interp][t.ThreadID]
			}
			return nil
		}
	}
	return err
}

// names reads each interpreter's threading._active: by the interpreter's
// address, ident → name (nil for an interpreter without one).
func (rt *Runtime) names() (map[uint64]map[uint64]string, error) {
	r := &reader{rt: rt, l: rt.Layout, budget: namesBudget, classes: map[uint64]*class{}, splitAt: map[splitKey]int{}}
	interp, err := r.u64(rt.runtime + uint64(r.l.RuntimeInterpHead))
	if err != nil {
		return nil, fmt.Errorf("_PyRuntime: %v", err)
	}
	out := map[uint64]map[uint64]string{}
	for interp != 0 {
		if _, seen := out[interp]; seen || len(out) == maxInterps {
			return nil, fmt.Errorf("the interpreter list does not end within %d entries", maxInterps)
		}
		m, err := r.activeNames(interp)
		if err != nil {
			return nil, err
		}
		out[interp] = m
		at := interp
		if interp, err = r.u64(at + uint64(r.l.InterpNext)); err != nil {
			return nil, fmt.Errorf("interpreter %#x: %v", at, err)
		}
	}
	return out, nil
}

// activeNames reads interpreter interp's threading._active.
func (r *reader) activeNames(interp uint64) (map[uint64]string, error) {
	l := r.l
	modules, err := r.u64(interp + uint64(l.InterpModules))
	if err != nil {
		return nil, fmt.Errorf("interpreter %#x: %v", interp, err)
	}
	if modules == 0 {
		return nil, nil // (not yet, or no longer, initialized)
	}
	mod, err := r.dictGet(modules, "threading")
	if errors.Is(err, errNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("sys.modules: %v", err)
	}
	b, err := r.read(mod, max(l.ObType, l.ModuleDict)+8)
	if err != nil {
		return nil, fmt.Errorf("the threading module: %v", err)
	}
	if binary.LittleEndian.Uint64(b[l.ObType:]) != r.rt.modType {
		return nil, nil // (sys.modules["threading"] replaced by something else: not the module read)
	}
	globals := binary.LittleEndian.Uint64(b[l.ModuleDict:])
	active, err := r.dictGet(globals, "_active")
	if errors.Is(err, errNotFound) {
		return nil, nil // (threading being imported)
	} else if err != nil {
		return nil, fmt.Errorf("the threading module's globals: %v", err)
	}
	keys, values, err := r.dict(active)
	if err != nil {
		return nil, fmt.Errorf("threading._active: %v", err)
	}
	out := make(map[uint64]string, len(keys))
	for i, k := range keys {
		ident, err := r.long(k)
		if err != nil {
			return nil, fmt.Errorf("threading._active: a key: %v", err)
		}
		name, err := r.attr(values[i], "_name")
		if err != nil {
			return nil, fmt.Errorf("threading._active[%#x]: %v", ident, err)
		}
		s, err := r.strN(name, MaxName, true)
		if err != nil {
			return nil, fmt.Errorf("threading._active[%#x]._name: %v", ident, err)
		}
		out[ident] = cutName(s)
	}
	return out, nil
}

// cutName cuts s to MaxName bytes at a character's boundary.
func cutName(s string) string {
	if len(s) <= MaxName {
		return s
	}
	n := MaxName
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// dict reads the dict object at addr: its live entries' keys and values,
// in order.
func (r *reader) dict(addr uint64) (keys, values []uint64, err error) {
	dk, dv, err := r.dictHeader(addr)
	if err != nil {
		return nil, nil, err
	}
	if dv != 0 {
		dv += uint64(r.l.ValuesValues)
	}
	return r.entries(dk, dv)
}

// dictHeader reads the dict object at addr: its keys object and its
// values (a split table's; 0 for a combined one).
func (r *reader) dictHeader(addr uint64) (dk, dv uint64, err error) {
	l := r.l
	b, err := r.read(addr, max(l.ObType, l.DictKeys, l.DictValues)+8)
	if err != nil {
		return 0, 0, err
	}
	le := binary.LittleEndian
	if le.Uint64(b[l.ObType:]) != r.rt.dictType {
		return 0, 0, fmt.Errorf("%#x is not a dict", addr)
	}
	return le.Uint64(b[l.DictKeys:]), le.Uint64(b[l.DictValues:]), nil
}

// entries reads the dict keys object dk: its live entries' keys and
// values; values from the array at dv when it is not 0 (a split table's,
// or an instance's own values to dk, its type's shared keys).
func (r *reader) entries(dk, dv uint64) (keys, values []uint64, err error) {
	ks, vs, err := r.entriesAll(dk, dv)
	for i := range ks {
		if ks[i] != 0 && vs[i] != 0 { // (else a deleted entry, or one this instance lacks)
			keys, values = append(keys, ks[i]), append(values, vs[i])
		}
	}
	return keys, values, err
}

// entriesAll reads every entry of the dict keys object dk, deleted and
// empty ones too (0), in order: an entry's index is its value's in a
// split table's values.
func (r *reader) entriesAll(dk, dv uint64) (keys, values []uint64, err error) {
	l := r.l
	b, err := r.read(dk, l.KeysIndices)
	if err != nil {
		return nil, nil, fmt.Errorf("dict keys: %v", err)
	}
	le := binary.LittleEndian
	n := int64(le.Uint64(b[l.KeysNentries:]))
	var indexBytes int64
	esz, keyAt, valAt := l.EntrySize, 8, 16 // (me_hash, me_key, me_value)
	if l.KeysSize >= 0 {
		size := int64(le.Uint64(b[l.KeysSize:]))
		if size < 8 || size > 1<<maxDictLog2 || size&(size-1) != 0 {
			return nil, nil, fmt.Errorf("dict keys %#x: size %d", dk, size)
		}
		width := int64(1)
		if size > 0xff {
			width = 2
		}
		indexBytes = size * width
	} else {
		log2, log2idx, kind := int64(b[l.KeysLog2Size]), int64(b[l.KeysLog2IndexBytes]), b[l.KeysKind]
		if log2 < 3 || log2 > maxDictLog2 || log2idx < log2 || log2idx > log2+3 || kind > 2 {
			return nil, nil, fmt.Errorf("dict keys %#x: log2 size %d, of indices %d, kind %d", dk, log2, log2idx, kind)
		}
		indexBytes = 1 << log2idx
		if kind != 0 { // DICT_KEYS_UNICODE, _SPLIT: me_key, me_value
			esz, keyAt, valAt = l.UnicodeEntrySize, 0, 8
		}
	}
	if n < 0 || n > maxDictEntries || n > indexBytes {
		return nil, nil, fmt.Errorf("dict keys %#x: %d entries", dk, n)
	}
	if r.budget -= int(n); r.budget < 0 {
		return nil, nil, fmt.Errorf("more than %d dict entries to read", namesBudget)
	}
	raw := make([]byte, int(n)*esz)
	if _, err := r.rt.Mem.ReadAt(raw, int64(dk)+int64(l.KeysIndices)+indexBytes); err != nil && n > 0 {
		return nil, nil, fmt.Errorf("dict keys %#x: %w", dk, err)
	}
	var vals []byte
	if dv != 0 {
		vals = make([]byte, int(n)*8)
		if _, err := r.rt.Mem.ReadAt(vals, int64(dv)); err != nil && n > 0 {
			return nil, nil, fmt.Errorf("dict values %#x: %w", dv, err)
		}
	}
	keys, values = make([]uint64, n), make([]uint64, n)
	for i := 0; i < int(n); i++ {
		e := raw[i*esz:]
		keys[i], values[i] = le.Uint64(e[keyAt:]), le.Uint64(e[valAt:])
		if vals != nil {
			values[i] = le.Uint64(vals[i*8:])
		}
	}
	return keys, values, nil
}

// dictGet is the value of key name (a str) in the dict at addr.
func (r *reader) dictGet(addr uint64, name string) (uint64, error) {
	if addr == 0 {
		return 0, errNotFound
	}
	dk, dv, err := r.dictHeader(addr)
	if err != nil {
		return 0, err
	}
	if dv != 0 {
		return r.splitGet(dk, dv+uint64(r.l.ValuesValues), name)
	}
	keys, values, err := r.entries(dk, 0)
	if err != nil {
		return 0, err
	}
	return r.lookup(keys, values, name)
}

// lookup is the value whose key is the str name.
func (r *reader) lookup(keys, values []uint64, name string) (uint64, error) {
	for i, k := range keys {
		if ok, err := r.strIs(k, name); err != nil {
			return 0, err
		} else if ok {
			return values[i], nil
		}
	}
	return 0, errNotFound
}

// strIs reports whether the object at addr is the compact ASCII str s (a
// key of a dict read, which may be of any type).
func (r *reader) strIs(addr uint64, s string) (bool, error) {
	l := r.l
	if l.StrASCIIData+len(s) > maxObjRead {
		return false, nil
	}
	b, err := r.read(addr, max(l.StrCompactData, l.StrASCIIData+len(s)))
	if err != nil {
		return false, err
	}
	le := binary.LittleEndian
	if le.Uint64(b[l.ObType:]) != r.rt.strType {
		return false, nil
	}
	state := le.Uint32(b[l.StrState:])
	compact, ascii := state>>5&1 == 1, state>>6&1 == 1
	return compact && ascii && le.Uint64(b[l.StrLength:]) == uint64(len(s)) &&
		string(b[l.StrASCIIData:l.StrASCIIData+len(s)]) == s, nil
}

// class is what attr reads of an instance's class, once per class.
type class struct {
	flags, basic, dictOff, sharedKeys uint64
	err                               error
}

// classOf reads (once per snapshot) the class at typ.
func (r *reader) classOf(typ uint64) *class {
	if c, ok := r.classes[typ]; ok {
		return c
	}
	l := r.l
	c := &class{}
	r.classes[typ] = c
	if c.flags, c.err = r.u64(typ + uint64(l.TypeFlags)); c.err != nil {
		return c
	}
	if c.flags&uint64(l.FlagHeapType) == 0 {
		c.err = fmt.Errorf("its type %#x is not a class", typ)
		return c
	}
	if c.basic, c.err = r.u64(typ + uint64(l.TypeBasicSize)); c.err == nil {
		if c.dictOff, c.err = r.u64(typ + uint64(l.TypeDictOffset)); c.err == nil {
			c.sharedKeys, c.err = r.u64(typ + uint64(l.HeapTypeCachedKeys))
		}
	}
	return c
}

// attr is the instance attribute name of the object at obj (of a class,
// a heap type): in its __dict__ (3.8-3.10: at the type's tp_dictoffset;
// 3.11+: the managed dict before the object), or in its values (3.11+:
// before the object, 3.13: after it), whose keys are its type's shared
// ones.
func (r *reader) attr(obj uint64, name string) (uint64, error) {
	l := r.l
	typ, err := r.u64(obj + uint64(l.ObType))
	if err != nil {
		return 0, err
	}
	c := r.classOf(typ)
	if c.err != nil {
		return 0, fmt.Errorf("its class: %v", c.err)
	}
	shared := func(values uint64) (uint64, error) { return r.splitGet(c.sharedKeys, values, name) }
	managed := obj + uint64(int64(l.ManagedDict))
	switch {
	case l.FlagInlineValues != 0 && c.flags&uint64(l.FlagInlineValues) != 0: // 3.13
		dict, err := r.u64(managed)
		if err != nil || dict != 0 {
			return r.dictGet(dict, name)
		}
		if c.basic > maxObjRead {
			return 0, fmt.Errorf("its class's basic size %d", c.basic)
		}
		values := obj + c.basic
		valid, err := r.read(values+uint64(l.ValuesValid), 1)
		if err != nil || valid[0] == 0 {
			return 0, fmt.Errorf("its values %#x are not in use (%v)", values, err)
		}
		return shared(values + uint64(l.ValuesValues))
	case l.FlagManagedDict != 0 && c.flags&uint64(l.FlagManagedDict) != 0:
		if l.TaggedValues != 0 { // 3.12
			w, err := r.u64(managed)
			if err != nil {
				return 0, err
			}
			if w&1 != 0 {
				return shared(w + 1 + uint64(l.ValuesValues))
			}
			return r.dictGet(w, name)
		}
		if l.ManagedValues != 0 { // 3.11
			values, err := r.u64(obj + uint64(int64(l.ManagedValues)))
			if err != nil {
				return 0, err
			}
			if values != 0 {
				return shared(values + uint64(l.ValuesValues))
			}
		}
		dict, err := r.u64(managed)
		if err != nil {
			return 0, err
		}
		return r.dictGet(dict, name)
	}
	if int64(c.dictOff) <= 0 || c.dictOff > maxObjRead {
		return 0, fmt.Errorf("its class's dict offset %d", int64(c.dictOff))
	}
	dict, err := r.u64(obj + c.dictOff)
	if err != nil {
		return 0, err
	}
	return r.dictGet(dict, name)
}

// splitGet is the value of key name in the values at dv (an array of
// value pointers) whose keys are the shared ones at dk. Shared keys only
// grow: where a key is is read once per snapshot, and each instance's
// value is then one read.
func (r *reader) splitGet(dk, dv uint64, name string) (uint64, error) {
	k := splitKey{dk, name}
	i, ok := r.splitAt[k]
	if !ok {
		keys, _, err := r.entriesAll(dk, 0)
		if err != nil {
			return 0, err
		}
		i = -1
		for j, key := range keys {
			if key == 0 {
				continue
			}
			if is, err := r.strIs(key, name); err != nil {
				return 0, err
			} else if is {
				i = j
				break
			}
		}
		r.splitAt[k] = i
	}
	if i < 0 {
		return 0, errNotFound
	}
	v, err := r.u64(dv + 8*uint64(i))
	if err == nil && v == 0 {
		err = errNotFound
	}
	return v, err
}

// long reads the int object at addr: a non-negative one of 64 bits.
func (r *reader) long(addr uint64) (uint64, error) {
	l := r.l
	// (Every member inside what is read: a 3.13 runtime's own offsets
	// put them where it says.)
	b, err := r.read(addr, max(l.LongDigits+4*maxLongDigits, l.ObType+8, l.LongTag+8, l.VarSize+8))
	if err != nil {
		return 0, err
	}
	le := binary.LittleEndian
	if le.Uint64(b[l.ObType:]) != r.rt.longType {
		return 0, fmt.Errorf("%#x is not an int", addr)
	}
	var n int64
	if l.LongTag >= 0 {
		tag := le.Uint64(b[l.LongTag:])
		switch tag & 3 {
		case 1: // zero
			return 0, nil
		case 2:
			return 0, fmt.Errorf("int %#x is negative", addr)
		}
		n = int64(tag >> 3)
	} else {
		n = int64(le.Uint64(b[l.VarSize:]))
	}
	if n < 0 || n > maxLongDigits {
		return 0, fmt.Errorf("int %#x: %d digits", addr, n)
	}
	var v uint64
	shift := uint(l.LongShift)
	for i := int(n) - 1; i >= 0; i-- {
		d := uint64(le.Uint32(b[l.LongDigits+4*i:]))
		if d>>shift != 0 || v>>(64-shift) != 0 {
			return 0, fmt.Errorf("int %#x does not fit 64 bits", addr)
		}
		v = v<<shift | d
	}
	return v, nil
}
