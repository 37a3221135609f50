package unwind

import "errors"

// DWARF expression opcodes used by call-frame information (DWARF 5 §2.5).
const (
	DW_OP_addr           = 0x03
	DW_OP_deref          = 0x06
	DW_OP_const1u        = 0x08
	DW_OP_const1s        = 0x09
	DW_OP_const2u        = 0x0a
	DW_OP_const2s        = 0x0b
	DW_OP_const4u        = 0x0c
	DW_OP_const4s        = 0x0d
	DW_OP_const8u        = 0x0e
	DW_OP_const8s        = 0x0f
	DW_OP_constu         = 0x10
	DW_OP_consts         = 0x11
	DW_OP_dup            = 0x12
	DW_OP_drop           = 0x13
	DW_OP_over           = 0x14
	DW_OP_pick           = 0x15
	DW_OP_swap           = 0x16
	DW_OP_rot            = 0x17
	DW_OP_abs            = 0x19
	DW_OP_and            = 0x1a
	DW_OP_div            = 0x1b
	DW_OP_minus          = 0x1c
	DW_OP_mod            = 0x1d
	DW_OP_mul            = 0x1e
	DW_OP_neg            = 0x1f
	DW_OP_not            = 0x20
	DW_OP_or             = 0x21
	DW_OP_plus           = 0x22
	DW_OP_plus_uconst    = 0x23
	DW_OP_shl            = 0x24
	DW_OP_shr            = 0x25
	DW_OP_shra           = 0x26
	DW_OP_xor            = 0x27
	DW_OP_bra            = 0x28
	DW_OP_eq             = 0x29
	DW_OP_ge             = 0x2a
	DW_OP_gt             = 0x2b
	DW_OP_le             = 0x2c
	DW_OP_lt             = 0x2d
	DW_OP_ne             = 0x2e
	DW_OP_skip           = 0x2f
	DW_OP_lit0           = 0x30
	DW_OP_lit31          = 0x4f
	DW_OP_breg0          = 0x70
	DW_OP_breg31         = 0x8f
	DW_OP_bregx          = 0x92
	DW_OP_deref_size     = 0x94
	DW_OP_nop            = 0x96
	DW_OP_call_frame_cfa = 0x9c
)

const (
	exprStackSize = 64
	exprMaxSteps  = 1000
)

var (
	errExprStack   = errors.New("dwarf expression stack over/underflow")
	errExprSteps   = errors.New("dwarf expression step budget exceeded")
	errExprOp      = errors.New("unsupported dwarf expression opcode")
	errExprDivZero = errors.New("dwarf expression division by zero")
	errExprBranch  = errors.New("dwarf expression branch out of range")
	errExprUnknown = errors.New("dwarf expression uses an unknown register")
	errExprMemory  = errors.New("dwarf expression reads unreadable memory")
	errExprEmpty   = errors.New("dwarf expression leaves an empty stack")
	errExprNoCFA   = errors.New("dwarf expression needs the CFA")
)

// exprEnv gives an expression access to registers and memory.
type exprEnv interface {
	reg(n int) (uint64, bool)
	readMem(addr uint64, size int) (uint64, bool)
}

// evalExpr evaluates a DWARF expression for call-frame information. If push
// is true, initial is pushed first (DW_CFA_expression pushes the CFA). cfa
// is the value of DW_OP_call_frame_cfa (haveCFA false: not available). It
// never allocates, never runs more than exprMaxSteps operations and never
// panics on malformed input.
func evalExpr(code []byte, env exprEnv, push bool, initial uint64, haveCFA bool, cfa uint64) (uint64, error) {
	var st [exprStackSize]uint64
	sp := 0
	if push {
		st[0] = initial
		sp = 1
	}
	r := newReader(code, 0)
	for steps := 0; r.Left() > 0; steps++ {
		if steps >= exprMaxSteps {
			return 0, errExprSteps
		}
		op := r.U8()
		// need n operands, room for m results
		need := func(n int) bool { return sp >= n }
		switch {
		case op >= DW_OP_lit0 && op <= DW_OP_lit31:
			if sp >= exprStackSize {
				return 0, errExprStack
			}
			st[sp] = uint64(op - DW_OP_lit0)
			sp++
			continue
		case op >= DW_OP_breg0 && op <= DW_OP_breg31 || op == DW_OP_bregx:
			var reg uint64
			if op == DW_OP_bregx {
				reg = r.ULEB()
			} else {
				reg = uint64(op - DW_OP_breg0)
			}
			off := r.SLEB()
			if r.Err() != nil {
				return 0, r.Err()
			}
			if reg >= 1<<16 {
				return 0, errExprUnknown
			}
			v, ok := env.reg(int(reg)) // (a DWARF number: the walker maps it to its slot)
			if !ok {
				return 0, errExprUnknown
			}
			if sp >= exprStackSize {
				return 0, errExprStack
			}
			st[sp] = v + uint64(off)
			sp++
			continue
		}
		var push1 bool
		var val uint64
		switch op {
		case DW_OP_nop:
		case DW_OP_addr, DW_OP_const8u, DW_OP_const8s:
			val, push1 = r.U64(), true
		case DW_OP_const1u:
			val, push1 = uint64(r.U8()), true
		case DW_OP_const1s:
			val, push1 = uint64(int64(int8(r.U8()))), true
		case DW_OP_const2u:
			val, push1 = uint64(r.U16()), true
		case DW_OP_const2s:
			val, push1 = uint64(int64(int16(r.U16()))), true
		case DW_OP_const4u:
			val, push1 = uint64(r.U32()), true
		case DW_OP_const4s:
			val, push1 = uint64(int64(int32(r.U32()))), true
		case DW_OP_constu:
			val, push1 = r.ULEB(), true
		case DW_OP_consts:
			val, push1 = uint64(r.SLEB()), true
		case DW_OP_call_frame_cfa:
			if !haveCFA {
				return 0, errExprNoCFA
			}
			val, push1 = cfa, true
		case DW_OP_dup:
			if !need(1) {
				return 0, errExprStack
			}
			val, push1 = st[sp-1], true
		case DW_OP_over:
			if !need(2) {
				return 0, errExprStack
			}
			val, push1 = st[sp-2], true
		case DW_OP_pick:
			i := int(r.U8())
			if !need(i + 1) {
				return 0, errExprStack
			}
			val, push1 = st[sp-1-i], true
		case DW_OP_drop:
			if !need(1) {
				return 0, errExprStack
			}
			sp--
		case DW_OP_swap:
			if !need(2) {
				return 0, errExprStack
			}
			st[sp-1], st[sp-2] = st[sp-2], st[sp-1]
		case DW_OP_rot:
			if !need(3) {
				return 0, errExprStack
			}
			st[sp-1], st[sp-2], st[sp-3] = st[sp-2], st[sp-3], st[sp-1]
		case DW_OP_deref, DW_OP_deref_size:
			size := 8
			if op == DW_OP_deref_size {
				size = int(r.U8())
				if size < 1 || size > 8 {
					return 0, errExprOp
				}
			}
			if !need(1) {
				return 0, errExprStack
			}
			v, ok := env.readMem(st[sp-1], size)
			if !ok {
				return 0, errExprMemory
			}
			st[sp-1] = v
		case DW_OP_abs:
			if !need(1) {
				return 0, errExprStack
			}
			if int64(st[sp-1]) < 0 {
				st[sp-1] = -st[sp-1]
			}
		case DW_OP_neg:
			if !need(1) {
				return 0, errExprStack
			}
			st[sp-1] = -st[sp-1]
		case DW_OP_not:
			if !need(1) {
				return 0, errExprStack
			}
			st[sp-1] = ^st[sp-1]
		case DW_OP_plus_uconst:
			u := r.ULEB()
			if !need(1) {
				return 0, errExprStack
			}
			st[sp-1] += u
		case DW_OP_and, DW_OP_div, DW_OP_minus, DW_OP_mod, DW_OP_mul, DW_OP_or, DW_OP_plus,
			DW_OP_shl, DW_OP_shr, DW_OP_shra, DW_OP_xor,
			DW_OP_eq, DW_OP_ge, DW_OP_gt, DW_OP_le, DW_OP_lt, DW_OP_ne:
			if !need(2) {
				return 0, errExprStack
			}
			b, a := st[sp-1], st[sp-2]
			sp--
			var v uint64
			switch op {
			case DW_OP_and:
				v = a & b
			case DW_OP_div:
				if b == 0 {
					return 0, errExprDivZero
				}
				if int64(b) == -1 {
					v = -a // avoids the MinInt64 / -1 trap
				} else {
					v = uint64(int64(a) / int64(b))
				}
			case DW_OP_minus:
				v = a - b
			case DW_OP_mod:
				if b == 0 {
					return 0, errExprDivZero
				}
				v = a % b
			case DW_OP_mul:
				v = a * b
			case DW_OP_or:
				v = a | b
			case DW_OP_plus:
				v = a + b
			case DW_OP_shl:
				if b < 64 {
					v = a << b
				}
			case DW_OP_shr:
				if b < 64 {
					v = a >> b
				}
			case DW_OP_shra:
				if b >= 64 {
					b = 63
				}
				v = uint64(int64(a) >> b)
			case DW_OP_xor:
				v = a ^ b
			case DW_OP_eq:
				v = b2u(a == b)
			case DW_OP_ge:
				v = b2u(int64(a) >= int64(b))
			case DW_OP_gt:
				v = b2u(int64(a) > int64(b))
			case DW_OP_le:
				v = b2u(int64(a) <= int64(b))
			case DW_OP_lt:
				v = b2u(int64(a) < int64(b))
			case DW_OP_ne:
				v = b2u(a != b)
			}
			st[sp-1] = v
		case DW_OP_skip, DW_OP_bra:
			d := int(int16(r.U16()))
			if r.Err() != nil {
				return 0, r.Err()
			}
			take := true
			if op == DW_OP_bra {
				if !need(1) {
					return 0, errExprStack
				}
				sp--
				take = st[sp] != 0
			}
			if take {
				to := r.Off + d
				if to < 0 || to > len(code) {
					return 0, errExprBranch
				}
				r.Off = to
			}
		default:
			return 0, errExprOp
		}
		if r.Err() != nil {
			return 0, r.Err()
		}
		if push1 {
			if sp >= exprStackSize {
				return 0, errExprStack
			}
			st[sp] = val
			sp++
		}
	}
	if r.Err() != nil {
		return 0, r.Err()
	}
	if sp == 0 {
		return 0, errExprEmpty
	}
	return st[sp-1], nil
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
