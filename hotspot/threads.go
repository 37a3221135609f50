package hotspot

import (
	"fmt"
	"strings"
	"unicode/utf16"
)

// maxThreads bounds the JavaThreads listed.
const maxThreads = 1 << 16

// maxNameChars bounds the characters of a thread name read.
const maxNameChars = 256

// Thread is one JavaThread.
type Thread struct {
	Addr      uint64 // the JavaThread
	TID       int    // its OS thread id
	Name      string // java.lang.Thread's name ("" unknown)
	State     string // in_Java, in_vm, in_native, blocked (with _trans while switching)
	StackBase uint64 // its stack's highest address
	StackSize uint64
	// PendingMonitor is the ObjectMonitor it blocks entering, and
	// WaitingMonitor the one it waits on (Object.wait); 0 none.
	PendingMonitor, WaitingMonitor uint64
	threadObj                      uint64 // the java.lang.Thread
}

// Threads lists the JVM's JavaThreads (ThreadsSMRSupport's list). The
// JVM runs meanwhile: a thread that ends while it is read may be missing
// or have no name.
func (vm *VM) Threads() ([]Thread, error) {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	l, m := vm.l, vm.m
	list, err := m.u64(l.javaThreadList)
	if err != nil || list == 0 {
		return nil, fmt.Errorf("the JVM's thread list cannot be read (%v)", err)
	}
	n, err1 := m.u32(list + l.threadsListLength)
	arr, err2 := m.u64(list + l.threadsListThreads)
	if err1 != nil || err2 != nil || n > maxThreads {
		return nil, fmt.Errorf("the JVM's thread list cannot be read (%d threads)", n)
	}
	if n == 0 {
		return nil, nil
	}
	ptrs := make([]byte, 8*n)
	if err := m.read(ptrs, arr); err != nil {
		return nil, fmt.Errorf("the JVM's thread list cannot be read (%w)", err)
	}
	out := make([]Thread, 0, n)
	for i := uint32(0); i < n; i++ {
		if t, ok := vm.thread(le64(ptrs[8*i:])); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

func (vm *VM) thread(jt uint64) (Thread, bool) {
	l, m := vm.l, vm.m
	t := Thread{Addr: jt}
	if jt == 0 || jt&7 != 0 {
		return t, false
	}
	ost, err := m.u64(jt + l.jtOSThread)
	if err != nil || ost == 0 {
		return t, false
	}
	tid, err := m.u32(ost + l.osThreadID)
	if err != nil || tid == 0 || tid > 1<<22 {
		return t, false
	}
	t.TID = int(tid)
	if st, err := m.u32(jt + l.jtState); err == nil {
		t.State = vm.stateName(int64(st))
	}
	t.StackBase, _ = m.u64(jt + l.jtStackBase)
	t.StackSize, _ = m.u64(jt + l.jtStackSize)
	t.PendingMonitor, _ = m.u64(jt + l.jtPendingMonitor)
	t.WaitingMonitor, _ = m.u64(jt + l.jtWaitingMonitor)
	if h, err := m.u64(jt + l.jtThreadObj + l.oopHandleObj); err == nil && h != 0 {
		t.threadObj, _ = m.u64(h)
	}
	if t.threadObj != 0 {
		t.Name = vm.stringField(t.threadObj, "name")
	}
	return t, true
}

// stateName names a JavaThreadState.
func (vm *VM) stateName(v int64) string {
	l := vm.l
	for _, s := range []struct {
		v    int64
		name string
	}{{l.stateInJava, "in_Java"}, {l.stateInVM, "in_vm"}, {l.stateInNative, "in_native"}, {l.stateBlocked, "blocked"}} {
		switch v {
		case s.v:
			return s.name
		case s.v + 1:
			return s.name + "_trans"
		}
	}
	return fmt.Sprintf("state %d", v)
}

// klassOf reads an object's Klass*.
func (vm *VM) klassOf(obj uint64) uint64 {
	if obj == 0 || obj&7 != 0 {
		return 0
	}
	if vm.compressedKlass {
		n, err := vm.m.u32(obj + vm.l.narrowKlassField)
		if err != nil || n == 0 {
			return 0
		}
		return vm.klassBase + uint64(n)<<vm.klassShift
	}
	k, _ := vm.m.u64(obj + vm.l.oopKlass)
	return k
}

// oopField reads a reference field of obj at off.
func (vm *VM) oopField(obj, off uint64) uint64 {
	if vm.compressedOops {
		n, err := vm.m.u32(obj + off)
		if err != nil || n == 0 {
			return 0
		}
		return vm.oopBase + uint64(n)<<vm.oopShift
	}
	p, _ := vm.m.u64(obj + off)
	return p
}

// maxSupers bounds the superclasses searched for a field.
const maxSupers = 32

// fieldOffset finds the offset of the Java field name in the class k or
// its superclasses (from each InstanceKlass's fields array); 0 when none.
func (vm *VM) fieldOffset(k uint64, name string) uint64 {
	key := fieldKey{k, name}
	if off, ok := vm.fields[key]; ok {
		return off
	}
	var off uint64
	for c, i := k, 0; c != 0 && i < maxSupers && off == 0; i++ {
		off = vm.ownField(c, name)
		c, _ = vm.m.u64(c + vm.l.klassSuper)
	}
	if vm.fields == nil || len(vm.fields) >= maxCache {
		vm.fields = map[fieldKey]uint64{}
	}
	vm.fields[key] = off
	return off
}

// maxFields bounds the fields of a class read.
const maxFields = 4096

// ownField finds a field declared by the class k (FieldInfo: a tuple of
// field_slots u2s per field; the offset packed in two of them).
func (vm *VM) ownField(k uint64, name string) uint64 {
	l, m := vm.l, vm.m
	fa, err1 := m.u64(k + l.ikFields)
	count, err2 := m.u16(k + l.ikJavaFieldsCount)
	cp, err3 := m.u64(k + l.ikConstants)
	if err1 != nil || err2 != nil || err3 != nil || fa == 0 || count == 0 || count > maxFields || l.fieldSlots == 0 || l.fieldSlots > 16 {
		return 0
	}
	n, err := m.u32(fa)
	if err != nil || uint64(n) < uint64(count)*l.fieldSlots {
		return 0
	}
	buf := make([]byte, 2*uint64(count)*l.fieldSlots)
	if m.read(buf, fa+l.arrayU2Data) != nil {
		return 0
	}
	u2 := func(i, slot uint64) uint64 {
		j := 2 * (i*l.fieldSlots + slot)
		return uint64(buf[j]) | uint64(buf[j+1])<<8
	}
	tagMask := uint64(1)<<l.fieldTagSize - 1
	for i := uint64(0); i < uint64(count); i++ {
		if u2(i, l.fieldAccess)&l.fieldInternal != 0 {
			continue
		}
		packed := u2(i, l.fieldHigh)<<16 | u2(i, l.fieldLow)
		if packed&tagMask != l.fieldTagOffset {
			continue
		}
		if vm.cpSymbol(cp, u2(i, l.fieldNameIndex)) == name {
			return packed >> l.fieldTagSize
		}
	}
	return 0
}

// stringField reads the java.lang.String in obj's field name.
func (vm *VM) stringField(obj uint64, name string) string {
	k := vm.klassOf(obj)
	if k == 0 {
		return ""
	}
	off := vm.fieldOffset(k, name)
	if off == 0 {
		return ""
	}
	return vm.javaString(vm.oopField(obj, off))
}

// javaString reads a java.lang.String: its value byte[] in Latin-1 or
// UTF-16 (coder 0 or 1), at most maxNameChars characters.
func (vm *VM) javaString(s uint64) string {
	k := vm.klassOf(s)
	if k == 0 {
		return ""
	}
	valueOff, coderOff := vm.fieldOffset(k, "value"), vm.fieldOffset(k, "coder")
	if valueOff == 0 || coderOff == 0 {
		return ""
	}
	coder, err := vm.m.u8(s + coderOff)
	if err != nil || coder > 1 {
		return ""
	}
	arr := vm.oopField(s, valueOff)
	if arr == 0 {
		return ""
	}
	lenOff := vm.arrayLengthOffset()
	n, err := vm.m.u32(arr + lenOff)
	if err != nil || n > 1<<20 {
		return ""
	}
	base := (lenOff + 4 + vm.l.heapWordSize - 1) &^ (vm.l.heapWordSize - 1)
	cut := false
	if limit := uint32(maxNameChars) << coder; n > limit {
		n, cut = limit, true
	}
	buf := make([]byte, n)
	if vm.m.read(buf, arr+base) != nil {
		return ""
	}
	var out string
	if coder == 0 {
		r := make([]rune, len(buf))
		for i, c := range buf {
			r[i] = rune(c)
		}
		out = string(r)
	} else {
		u := make([]uint16, len(buf)/2)
		for i := range u {
			u[i] = uint16(buf[2*i]) | uint16(buf[2*i+1])<<8
		}
		out = string(utf16.Decode(u))
	}
	if cut {
		out += "..."
	}
	return strings.ToValidUTF8(out, "?")
}

// arrayLengthOffset is where an array's length lies: right after the
// header's klass pointer (compressed or not).
func (vm *VM) arrayLengthOffset() uint64 {
	if vm.compressedKlass {
		return vm.l.narrowKlassField + 4
	}
	return vm.l.oopKlass + 8
}
