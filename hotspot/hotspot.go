// Package hotspot reads a HotSpot JVM's threads and Java frames from its
// memory, without its help and without stopping it: no attach, no agent,
// no safepoint. Everything it knows of HotSpot's structures comes from the
// tables libjvm.so exports for its Serviceability Agent (gHotSpotVMStructs,
// gHotSpotVMTypes, gHotSpotVMIntConstants, gHotSpotVMLongConstants; see
// vmstructs.go), so no offset is written here per release.
//
// It gives the JavaThreads (OS thread id, java.lang.Thread name, state,
// the monitor each waits for), what a PC in the code cache is (the
// interpreter, a compiled method, a stub, with the frame size the
// unwinder needs to walk through code that has no CFI) and the Java
// frames at a PC (the method, its inlined callees, file and line).
//
// The package takes memory as an io.ReaderAt and knows nothing of ptrace,
// processes or the sandbox. The target's memory is hostile and changes
// while it is read: every read is bounded (a budget per VM, caps on every
// count and string), every pointer checked where it can be, and what does
// not check out is an error or an unnamed frame, never a guess. x86-64 only.
package hotspot

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// VM is an opened JVM.
type VM struct {
	Version string // "17.0.15+6-Debian-1deb12u1" (the VM's release string)
	l       *layout
	m       *mem
	mu      sync.Mutex // the caches and m (the resolver may name from several goroutines)

	compressedOops, compressedKlass bool
	oopBase, klassBase              uint64
	oopShift, klassShift            uint64
	codeLow, codeHigh               uint64
	heaps                           []codeHeap
	callStubReturn                  uint64 // StubRoutines::_call_stub_return_address's value, 0 unknown

	blobs   map[uint64]*Blob    // by start
	methods map[uint64]*method  // by Method*
	fields  map[fieldKey]uint64 // field offsets by klass and name
	names   map[uint64]string   // Symbol* -> text
}

type fieldKey struct {
	klass uint64
	name  string
}

// maxCache bounds each cache (a long recording meets many methods).
const maxCache = 1 << 14

// Open reads the VM's tables through the addresses of their symbols (load
// bias applied; see TableSymbols) and checks that it can read what it
// needs.
func Open(r io.ReaderAt, sym map[string]uint64) (*VM, error) {
	m := newMem(r)
	t, err := readTables(m, sym)
	if err != nil {
		return nil, fmt.Errorf("the JVM's tables cannot be read (%w)", err)
	}
	l, err := newLayout(t)
	if err != nil {
		return nil, err
	}
	vm := &VM{l: l, m: m}
	if err := vm.init(); err != nil {
		return nil, err
	}
	return vm, nil
}

// Refresh gives the VM a fresh read budget (a new capture of a process it
// keeps reading, as a sampler does) and forgets the code blobs (code is
// freed and reused).
func (vm *VM) Refresh() {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	vm.m.left = maxRead
	vm.blobs = nil
}

func (vm *VM) init() error {
	l, m := vm.l, vm.m
	rel, err := m.u64(l.vmRelease)
	if err == nil {
		vm.Version, err = m.cstring(rel, 128)
	}
	if err != nil {
		return fmt.Errorf("the JVM's release cannot be read (%w)", err)
	}
	if !printable(vm.Version) {
		return errors.New("the JVM's release string is not text")
	}
	if err := vm.readFlags(); err != nil {
		return err
	}
	var errs [6]error
	vm.oopBase, errs[0] = m.u64(l.narrowOopBase)
	shift, e1 := m.u32(l.narrowOopShift)
	vm.klassBase, errs[2] = m.u64(l.narrowKlassBase)
	kshift, e3 := m.u32(l.narrowKlassShift)
	vm.codeLow, errs[4] = m.u64(l.codeLow)
	vm.codeHigh, errs[5] = m.u64(l.codeHigh)
	errs[1], errs[3] = e1, e3
	if err := errors.Join(errs[:]...); err != nil {
		return fmt.Errorf("the JVM's heap and code cache bounds cannot be read (%w)", err)
	}
	if shift > 8 || kshift > 8 {
		return fmt.Errorf("compressed pointer shifts %d and %d are not HotSpot's", shift, kshift)
	}
	vm.oopShift, vm.klassShift = uint64(shift), uint64(kshift)
	if vm.codeLow >= vm.codeHigh || vm.codeHigh-vm.codeLow > 4<<30 {
		return fmt.Errorf("the code cache's bounds %#x-%#x are not", vm.codeLow, vm.codeHigh)
	}
	if a, ok := vm.l.optional["StubRoutines::_call_stub_return_address"]; ok {
		vm.callStubReturn, _ = m.u64(a)
	}
	return vm.readHeaps()
}

// maxFlags bounds the JVM's flag table (JDK 17 has about 1,400).
const maxFlags = 10000

// readFlags reads the two flags that say how oops and klass pointers are
// stored.
func (vm *VM) readFlags() error {
	l, m := vm.l, vm.m
	n, err := m.u64(l.numFlags)
	if err != nil {
		return fmt.Errorf("the JVM's flags cannot be read (%w)", err)
	}
	base, err := m.u64(l.flags)
	if err != nil || n > maxFlags || l.flagSize == 0 {
		return fmt.Errorf("the JVM's flag table cannot be read (%d flags, %v)", n, err)
	}
	found := 0
	for i := uint64(0); i < n && found < 2; i++ {
		e := base + i*l.flagSize
		np, err := m.u64(e + l.flagName)
		if err != nil || np == 0 {
			continue
		}
		name, err := m.cstring(np, 64)
		if err != nil || name != "UseCompressedOops" && name != "UseCompressedClassPointers" {
			continue
		}
		addr, err := m.u64(e + l.flagAddr)
		if err != nil {
			return fmt.Errorf("flag %s cannot be read (%w)", name, err)
		}
		v, err := m.u8(addr)
		if err != nil {
			return fmt.Errorf("flag %s cannot be read (%w)", name, err)
		}
		if name == "UseCompressedOops" {
			vm.compressedOops = v != 0
		} else {
			vm.compressedKlass = v != 0
		}
		found++
	}
	if found < 2 {
		return errors.New("the JVM's flag table lacks UseCompressedOops or UseCompressedClassPointers")
	}
	return nil
}

// printable reports whether s is plain printable ASCII.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return s != ""
}

// Runtime is the version to report: Java's release ("17.0.15") as the
// VM's release string starts with it.
func (vm *VM) Release() string {
	v := vm.Version
	if i := strings.IndexAny(v, "+-"); i > 0 {
		v = v[:i]
	}
	return v
}

// InCodeCache reports whether pc lies in the code cache's reserved range.
func (vm *VM) InCodeCache(pc uint64) bool { return pc >= vm.codeLow && pc < vm.codeHigh }

// CodeRange is the code cache's reserved range.
func (vm *VM) CodeRange() (lo, hi uint64) { return vm.codeLow, vm.codeHigh }
