package unwind

import (
	"fmt"
	"strconv"
)

// RuleKind is the kind of a register or CFA rule in a compiled row.
type RuleKind uint8

const (
	RuleUnset     RuleKind = iota // not mentioned by the CFI (same value for callee-saved registers)
	RuleUndefined                 // DW_CFA_undefined
	RuleSame                      // DW_CFA_same_value
	RuleOffset                    // saved at CFA+Off (DW_CFA_offset and friends)
	RuleValOffset                 // value is CFA+Off (DW_CFA_val_offset)
	RuleRegister                  // saved in register Reg (DW_CFA_register)
	RuleExpr                      // saved at the address computed by expression Off (DW_CFA_expression)
	RuleValExpr                   // value computed by expression Off (DW_CFA_val_expression)
	RuleCFAReg                    // CFA = Reg + Off (DW_CFA_def_cfa)
	RuleCFAExpr                   // CFA computed by expression Off (DW_CFA_def_cfa_expression)
	RuleBad                       // a rule this unwinder cannot represent (register out of range, huge offset)
)

// Rule is one compiled rule. For expression rules Off indexes the table's
// expression pool.
type Rule struct {
	Kind RuleKind
	Reg  uint8
	Off  int32
}

// ruleSet is the full set of rules in effect at a row; it is comparable so
// tables can deduplicate identical sets.
type ruleSet struct {
	CFA    Rule
	Regs   [NumRegs]Rule
	Signal bool   // the FDE's CIE has the 'S' augmentation
	Mask   uint32 // bit n: Regs[n] is not RuleUnset (set by the builder)
}

// Row is the unwind row in effect at an address, as returned by Table.Find.
type Row struct {
	Addr, End uint64 // [Addr, End): the file virtual addresses this row covers
	CFA       Rule
	Regs      [NumRegs]Rule
	Signal    bool
	table     *Table
}

// Expr returns the bytes of an expression rule's DWARF expression.
func (r *Row) Expr(rule Rule) []byte {
	if r.table == nil || (rule.Kind != RuleExpr && rule.Kind != RuleValExpr && rule.Kind != RuleCFAExpr) {
		return nil
	}
	return r.table.expr(rule.Off)
}

var regNames = [NumRegs]string{"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"}

// RegName returns the x86-64 name of DWARF register n, as readelf prints it.
func RegName(n int) string {
	if n >= 0 && n < NumRegs {
		return regNames[n]
	}
	return "r" + strconv.Itoa(n)
}

// RuleString formats a rule the way `readelf --debug-dump=frames-interp`
// prints a cell: "u", "s", "c-16", "v+8", "rbx", "exp", "vexp", and for the
// CFA column "rsp+8" or "exp".
func RuleString(r Rule) string {
	switch r.Kind {
	case RuleUnset, RuleUndefined:
		return "u"
	case RuleSame:
		return "s"
	case RuleOffset:
		return fmt.Sprintf("c%+d", r.Off)
	case RuleValOffset:
		return fmt.Sprintf("v%+d", r.Off)
	case RuleRegister:
		return RegName(int(r.Reg))
	case RuleExpr, RuleCFAExpr:
		return "exp"
	case RuleValExpr:
		return "vexp"
	case RuleCFAReg:
		return fmt.Sprintf("%s%+d", RegName(int(r.Reg)), r.Off)
	}
	return "n/a"
}

// String formats the row like a frames-interp line: address, CFA, then the
// callee-saved registers rbx rbp r12 r13 r14 r15 and ra.
func (r Row) String() string {
	s := fmt.Sprintf("%016x %-8s", r.Addr, RuleString(r.CFA))
	for _, reg := range [...]int{RegRBX, RegRBP, RegR12, RegR13, RegR14, RegR15, RegRIP} {
		s += fmt.Sprintf(" %-5s", RuleString(r.Regs[reg]))
	}
	if r.Signal {
		s += " signal"
	}
	return s
}
