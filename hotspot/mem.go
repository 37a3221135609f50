package hotspot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxRead bounds the bytes one VM's reads may copy out of the target in
// all (its tables, threads, code blobs and names): a corrupt table that
// points the reader at a long chain costs at most this.
const maxRead = 32 << 20

// errBudget ends reading once maxRead bytes were read.
var errBudget = errors.New("read budget exhausted")

// mem reads the target's memory with a budget. Reads fail, never panic.
type mem struct {
	r    io.ReaderAt
	left int64
	buf  [8]byte
}

func newMem(r io.ReaderAt) *mem { return &mem{r: r, left: maxRead} }

// read fills p from addr.
func (m *mem) read(p []byte, addr uint64) error {
	if int64(len(p)) > m.left {
		return errBudget
	}
	m.left -= int64(len(p))
	if addr == 0 || addr+uint64(len(p)) < addr || addr >= 1<<63 {
		return fmt.Errorf("bad address %#x", addr)
	}
	n, err := m.r.ReadAt(p, int64(addr))
	if n < len(p) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading %d bytes at %#x: %w", len(p), addr, err)
	}
	return nil
}

func (m *mem) u64(addr uint64) (uint64, error) {
	if err := m.read(m.buf[:8], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(m.buf[:8]), nil
}

func (m *mem) u32(addr uint64) (uint32, error) {
	if err := m.read(m.buf[:4], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(m.buf[:4]), nil
}

func (m *mem) u16(addr uint64) (uint16, error) {
	if err := m.read(m.buf[:2], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(m.buf[:2]), nil
}

func (m *mem) u8(addr uint64) (uint8, error) {
	if err := m.read(m.buf[:1], addr); err != nil {
		return 0, err
	}
	return m.buf[0], nil
}

// uint reads an unsigned integer of size bytes (1, 2, 4 or 8).
func (m *mem) uint(addr uint64, size uint64) (uint64, error) {
	switch size {
	case 1:
		v, err := m.u8(addr)
		return uint64(v), err
	case 2:
		v, err := m.u16(addr)
		return uint64(v), err
	case 4:
		v, err := m.u32(addr)
		return uint64(v), err
	case 8:
		return m.u64(addr)
	}
	return 0, fmt.Errorf("integer of %d bytes", size)
}

// cstring reads a NUL-terminated string of at most max bytes.
func (m *mem) cstring(addr uint64, max int) (string, error) {
	var out []byte
	var chunk [64]byte
	for len(out) < max {
		// Never read across a page boundary in one go: the string may
		// end just before an unmapped page.
		n := 64 - int(addr&63)
		if err := m.read(chunk[:n], addr); err != nil {
			return "", err
		}
		for i := 0; i < n; i++ {
			if chunk[i] == 0 {
				return string(append(out, chunk[:i]...)), nil
			}
		}
		out = append(out, chunk[:n]...)
		addr += uint64(n)
	}
	return "", fmt.Errorf("string at %#x longer than %d bytes", addr, max)
}
