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
	return SectionDataAt(ctx, f.R, s, f.Size, f.Budget)
}

// SectionData is File.Data for a section of a file of size bytes.
func SectionData(ctx context.Context, s *elf.Section, size int64, b *Budget) (data []byte, err error) {
	return SectionDataAt(ctx, nil, s, size, b)
}

// SectionDataAt is SectionData for a section of the file r (nil: unknown):
// given r, a zlib-compressed section is decompressed in memory (see
// inflateSection), else through debug/elf's reader.
func SectionDataAt(ctx context.Context, r io.ReaderAt, s *elf.Section, size int64, b *Budget) (data []byte, err error) {
	return SectionDataProgress(ctx, r, s, size, b, nil)
}

// SectionDataProgress is SectionDataAt that, while a section is
// decompressed in memory, calls progress (when not nil) from time to
// time with the buffer being filled and how many of its first bytes are
// final: a caller can read those (and only those) before the section is
// whole. The buffer is the data returned, or, when the in-memory decoder
// gives up, one that is dropped. Other ways of reading never call it.
func SectionDataProgress(ctx context.Context, r io.ReaderAt, s *elf.Section, size int64, b *Budget, progress func(buf []byte, n int)) (data []byte, err error) {
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
			var ok bool
			if data, ok, err = inflateSection(ctx, r, s, b, s.Size, progress); !ok {
				data, err = readAll(ctx, s.Name, s.Open(), s.Size, b)
			}
		case strings.HasPrefix(s.Name, ".zdebug"):
			data, err = zdebug(ctx, r, s, b)
		default:
			data, err = readAll(ctx, s.Name, io.NewSectionReader(s.ReaderAt, 0, int64(s.FileSize)), s.FileSize, b)
		}
		return err
	})
	return data, err
}

// zdebug decompresses a legacy .zdebug_* section: "ZLIB", the size as a
// big-endian 64-bit number, a zlib stream.
func zdebug(ctx context.Context, r io.ReaderAt, s *elf.Section, b *Budget) ([]byte, error) {
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
	if data, ok, err := inflateSection(ctx, r, s, b, n, nil); ok {
		return data, err
	}
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

// inflateSection decompresses a zlib-compressed section of n bytes (an
// SHF_COMPRESSED one, its header in either class and byte order, or a
// .zdebug one) in memory with inflateZlib: the compressed bytes read
// whole, both buffers charged to b. ok is false when it cannot (zstd, a
// header it does not recognise, a stream inflateZlib refuses): the caller
// then reads the section through compress/zlib or debug/elf as before,
// which gives the same bytes or its own error. ctx's end is returned as
// err with ok true.
func inflateSection(ctx context.Context, r io.ReaderAt, s *elf.Section, b *Budget, n uint64, progress func([]byte, int)) (data []byte, ok bool, err error) {
	if r == nil || n > uint64(b.section) || s.FileSize > uint64(b.section) || s.FileSize < zdebugHdrBytes {
		return nil, false, nil
	}
	if err := b.Take(int64(s.FileSize)); err != nil {
		return nil, false, nil
	}
	defer b.Give(int64(s.FileSize))
	raw := make([]byte, s.FileSize)
	if _, err := r.ReadAt(raw, int64(s.Offset)); err != nil {
		return nil, false, nil
	}
	hdr := compressedHeader(raw, n)
	if hdr == 0 {
		return nil, false, nil
	}
	if err := b.Take(int64(n)); err != nil {
		return nil, false, nil
	}
	data = make([]byte, n)
	if err := inflateZlibProgress(ctx, data, raw[hdr:], progress); err != nil {
		b.Give(int64(n))
		if ctx != nil && ctx.Err() != nil {
			return nil, true, fmt.Errorf("%s: %w", s.Name, err)
		}
		return nil, false, nil
	}
	return data, true, nil
}

// compressedHeader returns the size of the header before a zlib stream of
// n bytes in a section's raw bytes, 0 if none is recognised: "ZLIB" and
// the size (.zdebug), else an ELF compression header of type zlib whose
// size field is n (64-bit: type, reserved 0, size, alignment; 32-bit:
// type, size, alignment), in either byte order.
func compressedHeader(raw []byte, n uint64) int {
	if string(raw[:4]) == "ZLIB" {
		if binary.BigEndian.Uint64(raw[4:]) == n {
			return zdebugHdrBytes
		}
		return 0
	}
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		if o.Uint32(raw) != uint32(elf.COMPRESS_ZLIB) {
			continue
		}
		if len(raw) >= chdr64Size && o.Uint32(raw[4:]) == 0 && o.Uint64(raw[8:]) == n {
			return chdr64Size
		}
		if o.Uint32(raw[4:]) == uint32(n) && n <= 0xffffffff {
			return chdr32Size
		}
	}
	return 0
}
