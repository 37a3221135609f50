package hotspot

import (
	"strings"
)

// accNative is JVM_ACC_NATIVE of the class file format (JVMS 4.6).
const accNative = 0x0100

// maxLineTable bounds the compressed line number table read of a method.
const maxLineTable = 64 << 10

// maxSymbol bounds a class, method or file name read.
const maxSymbol = 1024

// method is what a Method* names.
type method struct {
	class, name, file string
	native            bool
	codeBase          uint64 // the bytecodes' first byte
	codeSize          uint64
	lines             []byte // compressed line number table, nil if none
}

// Function is the method's Java name, "pkg.Class.method".
func (m *method) Function() string { return m.class + "." + m.name }

// methodAt reads (once) what the Method* at p names; nil when it does not
// check out. Called with vm.mu held.
func (vm *VM) methodAt(p uint64) *method {
	if mt, ok := vm.methods[p]; ok {
		return mt
	}
	mt := vm.readMethod(p)
	if vm.methods == nil || len(vm.methods) >= maxCache {
		vm.methods = map[uint64]*method{}
	}
	vm.methods[p] = mt
	return mt
}

func (vm *VM) readMethod(p uint64) *method {
	l, m := vm.l, vm.m
	if p == 0 || p&7 != 0 {
		return nil
	}
	cm, err := m.u64(p + l.methodConst)
	if err != nil || cm == 0 || cm&7 != 0 {
		return nil
	}
	access, err := m.u32(p + l.methodAccess)
	if err != nil {
		return nil
	}
	cp, err1 := m.u64(cm + l.cmConstants)
	codeSize, err2 := m.u16(cm + l.cmCodeSize)
	nameIdx, err3 := m.u16(cm + l.cmNameIndex)
	flags, err4 := m.u16(cm + l.cmFlags)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || cp == 0 {
		return nil
	}
	holder, err := m.u64(cp + l.cpHolder)
	if err != nil {
		return nil
	}
	mt := &method{native: access&accNative != 0, codeBase: cm + l.constMethodSize, codeSize: uint64(codeSize)}
	mt.name = vm.cpSymbol(cp, uint64(nameIdx))
	// A hidden class's name ends in "+<address>"; Java names it
	// "/<address>" (Klass::external_name).
	mt.class = strings.NewReplacer("/", ".", "+", "/").Replace(vm.klassName(holder))
	if mt.name == "" || mt.class == "" {
		return nil
	}
	if fi, err := m.u16(cp + l.cpSourceFile); err == nil && fi != 0 {
		mt.file = vm.cpSymbol(cp, uint64(fi))
	}
	if uint64(flags)&l.hasLineNumbers != 0 {
		mt.lines = vm.lineTable(mt.codeBase + mt.codeSize)
	}
	return mt
}

// lineTable reads a compressed line number table: up to its terminating
// zero byte, at most maxLineTable bytes, a page at a time.
func (vm *VM) lineTable(at uint64) []byte {
	var out []byte
	for len(out) < maxLineTable {
		n := 4096 - at&4095
		if n > 512 {
			n = 512
		}
		buf := make([]byte, n)
		if vm.m.read(buf, at) != nil {
			return out
		}
		out = append(out, buf...)
		at += n
		if pairsEnd(out) {
			return out
		}
	}
	return out
}

// pairsEnd reports whether a line table's bytes so far hold its end.
func pairsEnd(b []byte) bool {
	s := stream{b: b}
	for s.err == nil {
		next := s.byte()
		if s.err != nil {
			return false
		}
		if next == 0 {
			return true
		}
		if next == 0xff {
			s.int()
			s.int()
		}
	}
	return false
}

// cpSymbol reads the Symbol a constant pool entry holds.
func (vm *VM) cpSymbol(cp, idx uint64) string {
	n, err := vm.m.u32(cp + vm.l.cpLength)
	if err != nil || idx == 0 || idx >= uint64(n) {
		return ""
	}
	sym, err := vm.m.u64(cp + vm.l.cpSize + 8*idx)
	if err != nil {
		return ""
	}
	return vm.symbol(sym)
}

// klassName reads a Klass's name ("java/lang/Thread").
func (vm *VM) klassName(k uint64) string {
	if k == 0 {
		return ""
	}
	sym, err := vm.m.u64(k + vm.l.klassName)
	if err != nil {
		return ""
	}
	return vm.symbol(sym)
}

// symbol reads a Symbol's text ("" when it cannot be read or is not a
// name: names here are printable, never control characters).
func (vm *VM) symbol(p uint64) string {
	if p == 0 || p&1 != 0 {
		return ""
	}
	if s, ok := vm.names[p]; ok {
		return s
	}
	n, err := vm.m.u16(p + vm.l.symLength)
	if err != nil || n == 0 || n > maxSymbol {
		return ""
	}
	buf := make([]byte, n)
	if vm.m.read(buf, p+vm.l.symBody) != nil {
		return ""
	}
	for _, c := range buf {
		if c < 0x20 || c == 0x7f {
			return ""
		}
	}
	if vm.names == nil || len(vm.names) >= maxCache {
		vm.names = map[uint64]string{}
	}
	vm.names[p] = string(buf)
	return string(buf)
}
