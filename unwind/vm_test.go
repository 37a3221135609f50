package unwind

import (
	"encoding/binary"
	"errors"
	"stackshot/internal/bin"
	"strings"
	"testing"
)

// ehFrame assembles a .eh_frame section at vaddr 0x1000 holding one "zR" CIE
// (code align 1, data align -8, ra 16, FDE encoding pcrel|sdata4) with the
// given initial instructions, then one FDE for [begin, begin+size) per
// program, then a terminator.
func ehFrame(cieInit []byte, begin, size uint64, fdeProgs ...[]byte) []byte {
	var b []byte
	entry := func(body []byte) {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
	}
	cie := []byte{0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b}
	cie = append(cie, cieInit...)
	for len(cie)%8 != 4 {
		cie = append(cie, DW_CFA_nop)
	}
	entry(cie)
	for _, prog := range fdeProgs {
		pos := len(b) + 4 // the CIE pointer field
		body := binary.LittleEndian.AppendUint32(nil, uint32(pos))
		// pc_begin is pcrel from its own position (section vaddr 0x1000).
		field := uint64(0x1000 + len(b) + 8)
		body = binary.LittleEndian.AppendUint32(body, uint32(int32(begin-field)))
		body = binary.LittleEndian.AppendUint32(body, uint32(size))
		body = append(body, 0) // augmentation data length
		body = append(body, prog...)
		entry(body)
		begin += size
	}
	return binary.LittleEndian.AppendUint32(b, 0)
}

func compileEH(t *testing.T, data []byte) (*Table, error) {
	t.Helper()
	b := newBuilder()
	s := &frameSection{name: ".eh_frame", data: data, isEH: true, bases: ptrBases{section: 0x1000}}
	err := b.parseSection(s, 0)
	if err2 := b.compile(); err == nil {
		err = err2
	}
	return b.t, err
}

// rowsString renders "addr cfa rbx rbp r12 r13 r14 r15 ra" lines.
func rowsString(t *Table) string {
	var sb strings.Builder
	t.Rows(func(r Row) bool {
		sb.WriteString(strings.Join(strings.Fields(r.String()), " "))
		sb.WriteByte('\n')
		return true
	})
	return sb.String()
}

// The x86-64 CIE every gcc object carries:
//
//	DW_CFA_def_cfa: r7 (rsp) ofs 8
//	DW_CFA_offset: r16 (rip) at cfa-8
var stdCIE = []byte{DW_CFA_def_cfa, 7, 8, DW_CFA_offset | 16, 1}

func TestVMPushPop(t *testing.T) {
	// A function that pushes rbp and rbx, then pops them with remember/restore
	// around an early return:
	prog := []byte{
		DW_CFA_advance_loc | 1,    //   DW_CFA_advance_loc: 1 to 0000000000002001
		DW_CFA_def_cfa_offset, 16, //   DW_CFA_def_cfa_offset: 16
		DW_CFA_offset | 6, 2, //   DW_CFA_offset: r6 (rbp) at cfa-16
		DW_CFA_advance_loc | 1,    //   DW_CFA_advance_loc: 1 to 0000000000002002
		DW_CFA_def_cfa_offset, 24, //   DW_CFA_def_cfa_offset: 24
		DW_CFA_offset | 3, 3, //   DW_CFA_offset: r3 (rbx) at cfa-24
		DW_CFA_advance_loc | 4,    //   DW_CFA_advance_loc: 4 to 0000000000002006
		DW_CFA_remember_state,     //   DW_CFA_remember_state
		DW_CFA_def_cfa_offset, 16, //   DW_CFA_def_cfa_offset: 16
		DW_CFA_restore | 3,       //   DW_CFA_restore: r3 (rbx)
		DW_CFA_advance_loc | 1,   //   DW_CFA_advance_loc: 1 to 0000000000002007
		DW_CFA_def_cfa_offset, 8, //   DW_CFA_def_cfa_offset: 8
		DW_CFA_restore | 6,         //   DW_CFA_restore: r6 (rbp)
		DW_CFA_advance_loc | 1,     //   DW_CFA_advance_loc: 1 to 0000000000002008
		DW_CFA_restore_state,       //   DW_CFA_restore_state
		DW_CFA_advance_loc | 2,     //   DW_CFA_advance_loc: 2 to 000000000000200a
		DW_CFA_nop,                 //   DW_CFA_nop (the same row again: dropped)
		DW_CFA_advance_loc | 1,     //   DW_CFA_advance_loc: 1 to 000000000000200b
		DW_CFA_def_cfa_register, 6, //   DW_CFA_def_cfa_register: r6 (rbp)
	}
	tab, err := compileEH(t, ehFrame(stdCIE, 0x2000, 0x10, prog))
	if err != nil {
		t.Fatal(err)
	}
	want := `0000000000002000 rsp+8 u u u u u u c-8
0000000000002001 rsp+16 u c-16 u u u u c-8
0000000000002002 rsp+24 c-24 c-16 u u u u c-8
0000000000002006 rsp+16 u c-16 u u u u c-8
0000000000002007 rsp+8 u u u u u u c-8
0000000000002008 rsp+24 c-24 c-16 u u u u c-8
000000000000200b rbp+24 c-24 c-16 u u u u c-8
`
	if got := rowsString(tab); got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
	if _, ok := tab.Find(0x2010); ok {
		t.Error("row found past the FDE's end")
	}
	if _, ok := tab.Find(0x1fff); ok {
		t.Error("row found before the first FDE")
	}
	if r, ok := tab.Find(0x2009); !ok || r.Addr != 0x2008 || r.End != 0x200b {
		t.Errorf("Find(0x2009) = %v %v, want row [0x2008,0x200b)", r, ok)
	}
}

func TestVMAllRuleKinds(t *testing.T) {
	prog := []byte{
		DW_CFA_advance_loc1, 0x10, //   DW_CFA_advance_loc1: 16 to 0000000000002010
		DW_CFA_def_cfa_sf, 6, 0x7e, //   DW_CFA_def_cfa_sf: r6 (rbp) ofs 16
		DW_CFA_offset_extended, 12, 3, //   DW_CFA_offset_extended: r12 (r12) at cfa-24
		DW_CFA_offset_extended_sf, 13, 0x04, //   DW_CFA_offset_extended_sf: r13 (r13) at cfa-32
		DW_CFA_val_offset, 14, 1, //   DW_CFA_val_offset: r14 (r14) is cfa-8
		DW_CFA_register, 15, 3, //   DW_CFA_register: r15 (r15) in r3 (rbx)
		DW_CFA_same_value, 3, //   DW_CFA_same_value: r3 (rbx)
		DW_CFA_GNU_args_size, 16, //   DW_CFA_GNU_args_size: 16
		DW_CFA_advance_loc2, 0x10, 0, //   DW_CFA_advance_loc2: 16 to 0000000000002020
		DW_CFA_GNU_negative_offset_extended, 12, 0x7f, //   DW_CFA_GNU_negative_offset_extended: r12 at cfa+1016
		DW_CFA_val_offset_sf, 14, 0x7f, //   DW_CFA_val_offset_sf: r14 (r14) is cfa+8
		DW_CFA_undefined, 16, //   DW_CFA_undefined: r16 (rip)
		DW_CFA_restore_extended, 13, //   DW_CFA_restore_extended: r13 (r13)
		DW_CFA_advance_loc4, 0x10, 0, 0, 0, //   DW_CFA_advance_loc4: 16 to 0000000000002030
		DW_CFA_def_cfa_expression, 3, 0x77, 8, 0x06, //   DW_CFA_def_cfa_expression (DW_OP_breg7 (rsp): 8; DW_OP_deref)
		DW_CFA_expression, 6, 2, 0x77, 0x10, //   DW_CFA_expression: r6 (rbp) (DW_OP_breg7 (rsp): 16)
		DW_CFA_val_expression, 3, 1, 0x31, //   DW_CFA_val_expression: r3 (rbx) (DW_OP_lit1)
		DW_CFA_offset_extended, 40, 1, //   DW_CFA_offset_extended: r40 (xmm23) at cfa-8 (not tracked)
		DW_CFA_advance_loc | 8, //   DW_CFA_advance_loc: 8 to 0000000000002038
		DW_CFA_def_cfa, 7, 8,   //   DW_CFA_def_cfa: r7 (rsp) ofs 8
		DW_CFA_offset | 16, 1, //   DW_CFA_offset: r16 (rip) at cfa-8
	}
	tab, err := compileEH(t, ehFrame(stdCIE, 0x2000, 0x40, prog))
	if err != nil {
		t.Fatal(err)
	}
	want := `0000000000002000 rsp+8 u u u u u u c-8
0000000000002010 rbp+16 s u c-24 c-32 v-8 rbx c-8
0000000000002020 rbp+16 s u c+1016 u v+8 rbx u
0000000000002030 exp vexp exp c+1016 u v+8 rbx u
0000000000002038 rsp+8 vexp exp c+1016 u v+8 rbx c-8
`
	if got := rowsString(tab); got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
	r, _ := tab.Find(0x2030)
	if e := r.Expr(r.CFA); string(e) != "\x77\x08\x06" {
		t.Errorf("CFA expression % x", e)
	}
}

func TestVMSetLocAndSignal(t *testing.T) {
	// A "zRS" CIE (a signal trampoline's) with pcrel|sdata4 set_loc.
	var b []byte
	cie := []byte{0, 0, 0, 0, 1, 'z', 'R', 'S', 0, 1, 0x78, 16, 1, 0x1b, DW_CFA_def_cfa, 7, 8, DW_CFA_offset | 16, 1, 0, 0, 0, 0}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(cie)))
	b = append(b, cie...)
	pos := len(b)
	body := binary.LittleEndian.AppendUint32(nil, uint32(pos+4))
	body = binary.LittleEndian.AppendUint32(body, uint32(int32(0x3000-(0x1000+pos+8))))
	body = binary.LittleEndian.AppendUint32(body, 0x20)
	body = append(body, 0)
	// DW_CFA_set_loc: pcrel sdata4 to 0x3010, from its own position.
	setPos := 0x1000 + pos + 4 + len(body) + 1
	body = append(body, DW_CFA_set_loc)
	body = binary.LittleEndian.AppendUint32(body, uint32(int32(0x3010-setPos)))
	body = append(body, DW_CFA_def_cfa_offset, 32, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	b = binary.LittleEndian.AppendUint32(b, 0)
	tab, err := compileEH(t, b)
	if err != nil {
		t.Fatal(err)
	}
	want := `0000000000003000 rsp+8 u u u u u u c-8 signal
0000000000003010 rsp+32 u u u u u u c-8 signal
`
	if got := rowsString(tab); got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
}

func TestVMErrors(t *testing.T) {
	deep := make([]byte, 0, 40)
	for range maxRememberDepth + 1 {
		deep = append(deep, DW_CFA_remember_state)
	}
	for _, tc := range []struct {
		name string
		prog []byte
		want error
	}{
		{"underflow", []byte{DW_CFA_restore_state}, errRememberUnderflow},
		{"overflow", deep, errRememberOverflow},
		{"bad opcode", []byte{0x3f}, errBadOpcode},
		{"truncated", []byte{DW_CFA_def_cfa, 7}, bin.ErrShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A good FDE before the bad one must survive.
			tab, err := compileEH(t, ehFrame(stdCIE, 0x2000, 0x10, []byte{DW_CFA_nop}, tc.prog))
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want.Error()) {
				t.Fatalf("err = %v, want FormatError with %v", err, tc.want)
			}
			if _, ok := tab.Find(0x2005); !ok {
				t.Error("good FDE lost")
			}
			if _, ok := tab.Find(0x2015); ok {
				t.Error("bad FDE produced rows")
			}
		})
	}
}

// A .debug_frame with 64-bit DWARF lengths and a version 4 CIE (address
// and segment sizes), and a version 3 CIE with a 4-byte address FDE.
func TestDebugFrame64(t *testing.T) {
	var b []byte
	// CIE: length 0xffffffff + u64, id all ones, version 4, "", addr 8, seg 0,
	// code 1, data -8, ra 16, def_cfa rsp+8, offset rip c-8
	cie := binary.LittleEndian.AppendUint64(nil, ^uint64(0))
	cie = append(cie, 4, 0, 8, 0, 1, 0x78, 16, DW_CFA_def_cfa, 7, 8, DW_CFA_offset|16, 1)
	b = binary.LittleEndian.AppendUint32(b, 0xffffffff)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(cie)))
	b = append(b, cie...)
	// FDE: CIE pointer (section offset 0) as u64, pc_begin u64, range u64.
	fde := binary.LittleEndian.AppendUint64(nil, 0)
	fde = binary.LittleEndian.AppendUint64(fde, 0x5000)
	fde = binary.LittleEndian.AppendUint64(fde, 0x20)
	fde = append(fde, DW_CFA_advance_loc|4, DW_CFA_def_cfa_offset, 16, DW_CFA_offset|3, 2)
	b = binary.LittleEndian.AppendUint32(b, 0xffffffff)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(fde)))
	b = append(b, fde...)
	bu := newBuilder()
	if err := bu.parseSection(&frameSection{name: ".debug_frame", data: b}, 0); err != nil {
		t.Fatal(err)
	}
	if err := bu.compile(); err != nil {
		t.Fatal(err)
	}
	want := `0000000000005000 rsp+8 u u u u u u c-8
0000000000005004 rsp+16 c-16 u u u u u c-8
`
	if got := rowsString(bu.t); got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
}

func TestPointerEncodings(t *testing.T) {
	mem := map[uint64]uint64{0x9000: 0xabcdef}
	pb := ptrBases{section: 0x1000, text: 0x4000, data: 0x6000, fn: 0x7000,
		deref: func(a uint64) (uint64, bool) { v, ok := mem[a]; return v, ok }}
	for _, tc := range []struct {
		name string
		enc  uint8
		data []byte
		pre  int // bytes before the value (for pcrel and aligned)
		want uint64
	}{
		{"absptr", dwEhPeAbsptr, []byte{1, 2, 3, 4, 5, 6, 7, 8}, 0, 0x0807060504030201},
		{"udata2", dwEhPeUdata2, []byte{0x34, 0x12}, 0, 0x1234},
		{"sdata2", dwEhPeSdata2, []byte{0xfe, 0xff}, 0, ^uint64(1)},
		{"udata4", dwEhPeUdata4, []byte{0x78, 0x56, 0x34, 0x12}, 0, 0x12345678},
		{"sdata4 pcrel", dwEhPeSdata4 | dwEhPePcrel, []byte{0xf0, 0xff, 0xff, 0xff}, 4, 0x1000 + 4 - 16},
		{"udata8", dwEhPeUdata8, []byte{1, 0, 0, 0, 0, 0, 0, 0}, 0, 1},
		{"sdata8 datarel", dwEhPeSdata8 | dwEhPeDatarel, []byte{0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 0, 0x6000 - 8},
		{"uleb textrel", dwEhPeUleb128 | dwEhPeTextrel, []byte{0xe5, 0x8e, 0x26}, 0, 0x4000 + 624485},
		{"sleb funcrel", dwEhPeSleb128 | dwEhPeFuncrel, []byte{0x7f}, 0, 0x7000 - 1},
		{"aligned", dwEhPeAligned, []byte{9, 0, 0, 0, 0, 0, 0, 0}, 3, 9},
		{"indirect pcrel", dwEhPeSdata4 | dwEhPePcrel | dwEhPeIndirect, []byte{0x00, 0x80, 0, 0}, 0, 0xabcdef},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, tc.pre, tc.pre+len(tc.data)+8)
			if tc.name == "aligned" {
				buf = buf[:8] // value at the next 8-byte boundary
			}
			buf = append(buf, tc.data...)
			r := newReader(buf, tc.pre)
			got := r.encoded(tc.enc, &pb, true)
			if r.Err() != nil || got != tc.want {
				t.Errorf("got %#x err %v, want %#x", got, r.Err(), tc.want)
			}
		})
	}
	r := newReader([]byte{1, 2}, 0)
	if r.encoded(0x0d, &pb, true); r.Err() == nil {
		t.Error("bad format accepted")
	}
}
