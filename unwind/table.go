package unwind

import "unsafe"

// Table is a module's compiled call-frame information: rows sorted by
// address, each pointing at a deduplicated rule set, found by binary search.
// Addresses are the ELF file's virtual addresses; add ModuleInfo.Bias to get
// runtime addresses. A Table is immutable once built and safe for concurrent
// use. A lazy table (LoadTableLazy) compiles each FDE on first use instead.
type Table struct {
	addrs []uint64  // row start addresses, strictly increasing
	sets  []uint32  // rule set index per row, noRow for a gap between FDEs
	rules []ruleSet // deduplicated rule sets
	exprs [][]byte  // DWARF expressions referenced by expression rules
	lazy  *lazyCFI  // non-nil: a lazy table (the fields above are empty)
}

// Len returns the number of rows, counting the gaps between FDEs; for a
// lazy table, the number of FDEs its search table lists.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	if t.lazy != nil {
		return t.lazy.count
	}
	return len(t.addrs)
}

// lookup returns the rule set in effect at vaddr, or nil.
func (t *Table) lookup(vaddr uint64) (*ruleSet, int) {
	a := t.addrs
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] <= vaddr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo - 1
	if i < 0 || t.sets[i] == noRow {
		return nil, -1
	}
	return &t.rules[t.sets[i]], i
}

// Find returns the row in effect at the file virtual address vaddr.
func (t *Table) Find(vaddr uint64) (Row, bool) {
	if t == nil {
		return Row{}, false
	}
	s, start, end, src := t.rowAt(vaddr)
	if s == nil {
		return Row{}, false
	}
	return Row{Addr: start, End: end, CFA: s.CFA, Regs: s.Regs, Signal: s.Signal, table: src}, true
}

// Rows calls fn for every row (gaps excluded) in address order until fn
// returns false. A lazy table compiles itself whole for it.
func (t *Table) Rows(fn func(Row) bool) {
	if t == nil {
		return
	}
	t = t.compiled()
	for i := range t.Len() {
		if t.sets[i] == noRow {
			continue
		}
		s := &t.rules[t.sets[i]]
		row := Row{Addr: t.addrs[i], End: ^uint64(0), CFA: s.CFA, Regs: s.Regs, Signal: s.Signal, table: t}
		if i+1 < len(t.addrs) {
			row.End = t.addrs[i+1]
		}
		if !fn(row) {
			return
		}
	}
}

func (t *Table) expr(i int32) []byte {
	if i < 0 || int(i) >= len(t.exprs) {
		return nil
	}
	return t.exprs[i]
}

// Size returns the approximate memory the table holds, in bytes (for
// cache accounting).
func (t *Table) Size() int {
	if t == nil {
		return 0
	}
	n := len(t.addrs)*8 + len(t.sets)*4 + len(t.rules)*int(unsafe.Sizeof(ruleSet{}))
	for _, e := range t.exprs {
		n += len(e) + 24
	}
	if l := t.lazy; l != nil {
		n += len(l.sec.data) + len(l.table)
		l.mu.Lock()
		for _, ft := range l.fdes {
			n += ft.Size()
		}
		l.mu.Unlock()
	}
	return n
}
