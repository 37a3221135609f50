package unwind

import (
	"encoding/binary"
	"stackshot/internal/bin"
	"testing"
)

// testEnv is a walker over a synthetic stack at 0x1000 with rsp=0x1000,
// rbp=0x1010 and rip=0x40000b.
func testEnv() *walker {
	data := make([]byte, 64)
	for i := range 8 {
		binary.LittleEndian.PutUint64(data[i*8:], 0x100+uint64(i))
	}
	in := &Input{Stack: Stack{Addr: 0x1000, Data: data}}
	w := &walker{in: in}
	w.regs.Set(RegRSP, 0x1000)
	w.regs.Set(RegRBP, 0x1010)
	w.regs.Set(RegRIP, 0x40000b)
	return w
}

func TestExpr(t *testing.T) {
	for _, tc := range []struct {
		name string
		code []byte
		want uint64
		err  error
	}{
		// The lazy PLT entry's CFA: DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0;
		// DW_OP_lit15; DW_OP_and; DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
		{"plt", []byte{0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}, 0x1010, nil},
		// __restore_rt's CFA: DW_OP_breg7 (rsp): 160; DW_OP_deref -> outside the copy
		{"deref outside", []byte{0x77, 0xa0, 0x01, 0x06}, 0, errExprMemory},
		// DW_OP_breg6 (rbp): -8; DW_OP_deref
		{"deref", []byte{0x76, 0x78, 0x06}, 0x101, nil},
		// DW_OP_breg6 (rbp): 0; DW_OP_deref_size: 1
		{"deref_size", []byte{0x76, 0x00, 0x94, 1}, 0x02, nil},
		// DW_OP_const1s: -2; DW_OP_const2u: 7; DW_OP_mul; DW_OP_abs
		{"mul abs", []byte{0x09, 0xfe, 0x0a, 7, 0, 0x1e, 0x19}, 14, nil},
		// DW_OP_lit5; DW_OP_lit7; DW_OP_swap; DW_OP_minus
		{"swap minus", []byte{0x35, 0x37, 0x16, 0x1c}, 2, nil},
		// DW_OP_lit1; DW_OP_lit2; DW_OP_lit3; DW_OP_rot; DW_OP_drop; DW_OP_drop (leaves lit3's... rot -> 3 1 2)
		{"rot", []byte{0x31, 0x32, 0x33, 0x17, 0x13}, 1, nil},
		// DW_OP_lit0; DW_OP_bra: +1; DW_OP_lit9; DW_OP_lit4 -> bra not taken: 9 then 4
		{"bra not taken", []byte{0x30, 0x28, 1, 0, 0x39, 0x34}, 4, nil},
		// DW_OP_lit1; DW_OP_bra: +1; DW_OP_lit9; DW_OP_lit4 -> skips lit9
		{"bra taken", []byte{0x31, 0x28, 1, 0, 0x39}, 0, errExprEmpty},
		// DW_OP_skip: -3 (to itself): an endless loop, stopped by the budget
		{"loop", []byte{0x2f, 0xfd, 0xff}, 0, errExprSteps},
		// DW_OP_lit1; DW_OP_lit0; DW_OP_div
		{"div zero", []byte{0x31, 0x30, 0x1b}, 0, errExprDivZero},
		// DW_OP_breg3 (rbx): 0 -> rbx unknown
		{"unknown reg", []byte{0x73, 0}, 0, errExprUnknown},
		// DW_OP_drop on an empty stack
		{"underflow", []byte{0x13}, 0, errExprStack},
		// DW_OP_regx 0 (a location, not a value)
		{"regx", []byte{0x90, 0}, 0, errExprOp},
		// DW_OP_constu: 300; DW_OP_plus_uconst: 12; DW_OP_lit8; DW_OP_shr
		{"shr", []byte{0x10, 0xac, 0x02, 0x23, 12, 0x38, 0x25}, 1, nil},
		// DW_OP_skip past the end
		{"skip out", []byte{0x2f, 0x10, 0x00}, 0, errExprBranch},
		// DW_OP_consts: -1; DW_OP_lit0; DW_OP_lt
		{"signed lt", []byte{0x11, 0x7f, 0x30, 0x2d}, 1, nil},
		// DW_OP_const8u truncated
		{"truncated", []byte{0x0e, 1, 2}, 0, bin.ErrShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := evalExpr(tc.code, testEnv(), false, 0, false, 0)
			if err != tc.err || got != tc.want {
				t.Errorf("got %#x, %v; want %#x, %v", got, err, tc.want, tc.err)
			}
		})
	}
	// DW_CFA_expression pushes the CFA first: DW_OP_lit8; DW_OP_minus
	if got, err := evalExpr([]byte{0x38, 0x1c}, testEnv(), true, 0x2000, true, 0x2000); err != nil || got != 0x1ff8 {
		t.Errorf("pushed CFA: %#x %v", got, err)
	}
	// DW_OP_call_frame_cfa
	if got, err := evalExpr([]byte{0x9c}, testEnv(), false, 0, true, 0x3000); err != nil || got != 0x3000 {
		t.Errorf("call_frame_cfa: %#x %v", got, err)
	}
}
