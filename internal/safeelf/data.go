package safeelf

import (
	"compress/zlib"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"stackshot/internal/bin"
	"stackshot/internal/contain"
)

// ErrNoData is the error of reading a section that has no bytes in the
// file (SHT_NOBITS).
var ErrNoData = errors.New("section has no data in the file")

// Data reads section s of f into memory, decompressing SHF_COMPRESSED
// (zlib, zstd) and legacy .zdebug sections: at most the per-section cap,
// charged to f's Budget before anything is allocated, read in chunks
// between which ctx is checked (nil: never cancelled).
func (f *File) Data(ctx context.Context, s *elf.Section) ([]byte, error) {
	return SectionData(ctx, s, f.Size, f.Budget)
}

// SectionData is File.Data for a section of a file of size bytes.
func SectionData(ctx context.Context, s *elf.Section, size int64, b *Budget) (data []byte, err error) {
	b = b.orDefault()
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, ErrNoData
	}
	fsize := uint64(size)
	if s.Offset > fsize || s.FileSize > fsize-s.Offset {
		return nil, &bin.FormatError{Section: s.Name, Offset: s.Offset, Msg: "section past end of file"}
	}
	err = contain.Do("section "+s.Name, func() error {
		var err error
		switch {
		case s.Flags&elf.SHF_COMPRESSED != 0:
			data, err = readAll(ctx, s.Name, s.Open(), s.Size, b)
		case strings.HasPrefix(s.Name, ".zdebug"):
			data, err = zdebug(ctx, s, b)
		default:
			data, err = readAll(ctx, s.Name, io.NewSectionReader(s.ReaderAt, 0, int64(s.FileSize)), s.FileSize, b)
		}
		return err
	})
	return data, err
}

// zdebug decompresses a legacy .zdebug_* section: "ZLIB", the size as a
// big-endian 64-bit number, a zlib stream.
func zdebug(ctx context.Context, s *elf.Section, b *Budget) ([]byte, error) {
	var hdr [zdebugHdrBytes]byte
	if s.FileSize < zdebugHdrBytes {
		return nil, &bin.FormatError{Section: s.Name, Offset: s.Offset, Msg: "too small for a ZLIB header"}
	}
	if _, err := s.ReaderAt.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Name, err)
	}
	if string(hdr[:4]) != "ZLIB" {
		// Not compressed after all (as binutils reads it).
		return readAll(ctx, s.Name, io.NewSectionReader(s.ReaderAt, 0, int64(s.FileSize)), s.FileSize, b)
	}
	n := binary.BigEndian.Uint64(hdr[4:])
	zr, err := zlib.NewReader(io.NewSectionReader(s.ReaderAt, zdebugHdrBytes, int64(s.FileSize)-zdebugHdrBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return readAll(ctx, s.Name, zr, n, b)
}

// readAll reads exactly n bytes of r (a section's declared size), after
// checking n against the per-section cap and charging it to b.
func readAll(ctx context.Context, name string, r io.Reader, n uint64, b *Budget) ([]byte, error) {
	if n > uint64(b.section) {
		return nil, fmt.Errorf("%s: %w (%d bytes, cap %d)", name, ErrTooLarge, n, b.section)
	}
	if err := b.Take(int64(n)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	buf := make([]byte, n)
	for off := uint64(0); off < n; {
		if ctx != nil {
			if err := ctx.Err(); err != nil {
				b.Give(int64(n))
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		m, err := io.ReadFull(r, buf[off:off+min(readChunk, n-off)])
		off += uint64(m)
		if err != nil {
			b.Give(int64(n))
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, &bin.FormatError{Section: name, Offset: off, Msg: "data shorter than its declared size"}
			}
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
	}
	return buf, nil
}

// ReadStream reads a decompressing stream of unknown length (xz) to its
// end: at most the per-section cap, charged to b chunk by chunk before the
// chunk is allocated.
func ReadStream(ctx context.Context, name string, r io.Reader, b *Budget) ([]byte, error) {
	b = b.orDefault()
	var out []byte
	taken := int64(0)
	fail := func(err error) ([]byte, error) {
		b.Give(taken)
		return nil, err
	}
	for {
		if ctx != nil {
			if err := ctx.Err(); err != nil {
				return fail(fmt.Errorf("%s: %w", name, err))
			}
		}
		if int64(len(out))+readChunk > b.section+readChunk {
			return fail(fmt.Errorf("%s: %w (cap %d)", name, ErrTooLarge, b.section))
		}
		if err := b.Take(readChunk); err != nil {
			return fail(fmt.Errorf("%s: %w", name, err))
		}
		taken += readChunk
		out = append(out, make([]byte, readChunk)...)
		m, err := io.ReadFull(r, out[len(out)-readChunk:])
		out = out[:len(out)-readChunk+m]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			if int64(len(out)) > b.section {
				return fail(fmt.Errorf("%s: %w (cap %d)", name, ErrTooLarge, b.section))
			}
			b.Give(taken - int64(len(out)))
			return out[:len(out):len(out)], nil
		}
		if err != nil {
			return fail(fmt.Errorf("%s: %w", name, err))
		}
	}
}
