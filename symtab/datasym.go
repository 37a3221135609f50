package symtab

import (
	"fmt"
	"sync"
)

// dataSyms is a module's table of data objects (globals and statics),
// built on first use and kept with the module (modules are cached by
// build id, so a lock looked up again costs a binary search).
type dataSyms struct {
	once  sync.Once
	table *symTable
}

// DataSymbol names the global or static object of the module holding
// vaddr (an address in the module's ELF address space): its name and
// vaddr's offset in it. Symbols come from the debug file's .symtab, the
// module's .symtab and .dynsym (STT_OBJECT with a size).
func (m *Module) DataSymbol(vaddr uint64) (name string, off uint64, ok bool) {
	if m == nil || m.mismatch {
		return "", 0, false
	}
	m.data.once.Do(func() { m.data.table = m.collectData() })
	t := m.data.table
	i, ok := t.lookup(vaddr)
	if !ok {
		return "", 0, false
	}
	return t.nameAt(i, true), vaddr - t.addr[i], true
}

// DataName is DataSymbol as a lock is named: "pool_lock",
// "accounts+0x40".
func (m *Module) DataName(vaddr uint64) string {
	name, off, ok := m.DataSymbol(vaddr)
	switch {
	case !ok:
		return ""
	case off == 0:
		return name
	}
	return fmt.Sprintf("%s+%#x", name, off)
}

func (m *Module) collectData() *symTable {
	src := m.sources()
	if src == nil || src.broken.Load() {
		return nil
	}
	var raw []rawSym
	if src.debug != nil && hasSymtab(src.debug.ef) {
		raw, _ = collectSymsOf(src.debug, false, true, rankDebugSymtab, raw)
	}
	if m.file != nil && hasSymtab(m.file.ef) {
		raw, _ = collectSymsOf(m.file, false, true, rankSymtab, raw)
	}
	if m.file != nil {
		raw, _ = collectSymsOf(m.file, true, true, rankDynsym, raw)
	}
	return buildSymTable(raw)
}

// DataAddr is the address (in the module's ELF address space) of the data
// object named name, the first of that name in the module's table of
// globals and statics (see DataSymbol); ok is false when there is none.
func (m *Module) DataAddr(name string) (vaddr uint64, ok bool) {
	if m == nil || m.mismatch {
		return 0, false
	}
	m.data.once.Do(func() { m.data.table = m.collectData() })
	t := m.data.table
	if t == nil {
		return 0, false
	}
	for i := 0; i < t.count; i++ {
		if t.name(i) == name {
			return t.addr[i], true
		}
	}
	return 0, false
}
