package bin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestReaderSticky: after the first short read every read is zero and the
// first error stays.
func TestReaderSticky(t *testing.T) {
	r := NewReader([]byte{1, 2, 3}, binary.BigEndian)
	if v := r.U16(); v != 0x0102 {
		t.Fatalf("U16 = %#x", v)
	}
	if v := r.U32(); v != 0 || !errors.Is(r.Err(), ErrShort) {
		t.Fatalf("short U32 = %#x, err %v", v, r.Err())
	}
	if v := r.U8(); v != 0 || r.Left() != 0 || !errors.Is(r.Err(), ErrShort) {
		t.Errorf("after the error: U8 = %d, left %d, err %v", v, r.Left(), r.Err())
	}
}

// TestReaderLEB: DWARF spec examples, and an endless run of continuation
// bytes is an error, not a loop over the whole buffer.
func TestReaderLEB(t *testing.T) {
	r := NewReader([]byte{0xe5, 0x8e, 0x26, 0x7f, 0x80, 0x7f}, nil)
	if u := r.ULEB(); u != 624485 {
		t.Errorf("ULEB = %d, want 624485", u)
	}
	if s := r.SLEB(); s != -1 {
		t.Errorf("SLEB = %d, want -1", s)
	}
	if s := r.SLEB(); s != -128 {
		t.Errorf("SLEB = %d, want -128", s)
	}
	r = NewReader(bytes.Repeat([]byte{0x80}, 100), nil)
	if r.ULEB(); !errors.Is(r.Err(), ErrLEB) {
		t.Errorf("100 continuation bytes: err %v, want ErrLEB", r.Err())
	}
}

func TestReaderCString(t *testing.T) {
	r := NewReader([]byte("ab\x00c"), nil)
	if s := string(r.CString()); s != "ab" {
		t.Errorf("CString = %q", s)
	}
	if r.CString(); !errors.Is(r.Err(), ErrShort) {
		t.Errorf("unterminated: err %v", r.Err())
	}
	if s := CStringAt([]byte("x\x00yz\x00"), 2); s != "yz" {
		t.Errorf("CStringAt = %q", s)
	}
	if s := CStringAt([]byte("x"), 5); s != "" {
		t.Errorf("CStringAt out of range = %q", s)
	}
}
