// Package capfile reads and writes saved captures: stackshot's own capture
// file (gzipped JSON of the raw ptrace.Process captures, version 1) and ELF
// core files (stackshot's, gdb's gcore, the kernel's), so that `report` can
// unwind and symbolize them later or on another machine.
//
// Everything read here is hostile input: a capture file can come from
// anywhere. The decoder bounds the decompressed size, the number of objects
// and array elements and the nesting depth before the JSON decoder
// allocates for them, and returns errors, never panics.
package capfile

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"stackshot/internal/arch"
	"stackshot/internal/contain"
	"stackshot/ptrace"
)

// Format and Version name stackshot's capture file.
const (
	Format  = "stackshot-capture"
	Version = 1
)

// File is one saved capture: one or more processes captured together.
type File struct {
	Format    string            `json:"format"` // Format
	Version   int               `json:"version"`
	Host      string            `json:"host"`
	Kernel    bool              `json:"kernel_frames"`
	Processes []*ptrace.Process `json:"processes"`
}

// Limits on what Decode accepts. A legitimate capture of a 512-thread
// process is a few MiB decompressed and some 20,000 objects; these leave
// room for far larger ones and still bound what a crafted file can make
// the decoder allocate (a few hundred MiB at worst).
const (
	// MaxDecompressed bounds the decompressed JSON.
	MaxDecompressed = 256 << 20
	// MaxProcessJSON bounds one process's JSON (the decoder holds one
	// process at a time).
	MaxProcessJSON = 128 << 20
	// MaxObjects bounds the JSON objects in the whole file (threads,
	// mappings, kernel frames, ...).
	MaxObjects = 1 << 19
	// MaxElements bounds the array elements and object members.
	MaxElements = 1 << 22
	// MaxDepth bounds nesting.
	MaxDepth = 16
	// MaxProcesses bounds the processes in one file.
	MaxProcesses = 4096
)

// ErrNotCapture means the input is neither a stackshot capture nor an ELF
// core.
var ErrNotCapture = errors.New("not a stackshot capture or ELF core")

// ErrLimit is wrapped by every error about a size limit.
var ErrLimit = errors.New("capture exceeds a size limit")

// Encode writes f as a capture file (gzipped JSON).
func Encode(w io.Writer, f *File) error {
	if f.Format == "" {
		f.Format = Format
	}
	if f.Version == 0 {
		f.Version = Version
	}
	zw := gzip.NewWriter(w)
	if err := json.NewEncoder(zw).Encode(f); err != nil {
		return err
	}
	return zw.Close()
}

// Decode reads a capture file written by Encode (or by earlier versions of
// stackshot, which wrote the same format).
func Decode(r io.Reader) (f *File, err error) {
	if perr := contain.Do("reading a capture", func() error {
		f, err = decode(r)
		return nil
	}); perr != nil {
		return nil, perr
	}
	return f, err
}

func decode(r io.Reader) (f *File, err error) {
	zr, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNotCapture, err)
	}
	zr.Multistream(false)
	g := &guard{r: zr, budget: MaxDecompressed}
	dec := json.NewDecoder(g)
	dec.UseNumber()
	f = &File{}
	if err := expectDelim(dec, '{'); err != nil {
		return nil, g.explain(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, g.explain(err)
		}
		key, _ := tok.(string)
		switch key {
		case "format":
			err = dec.Decode(&f.Format)
		case "version":
			err = dec.Decode(&f.Version)
		case "host":
			err = dec.Decode(&f.Host)
		case "kernel_frames":
			err = dec.Decode(&f.Kernel)
		case "processes":
			err = decodeProcesses(dec, g, f)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, g.explain(err)
		}
		if key == "version" || key == "format" {
			if err := checkHeader(f); err != nil {
				return nil, err
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, g.explain(err)
	}
	if err := checkHeader(f); err != nil {
		return nil, err
	}
	if f.Format == "" {
		return nil, fmt.Errorf("%w (no format field)", ErrNotCapture)
	}
	return f, nil
}

// checkHeader rejects another format or a newer version as soon as the
// field is seen.
func checkHeader(f *File) error {
	if f.Format != "" && f.Format != Format {
		return fmt.Errorf("format %q: this stackshot reads %s version %d", f.Format, Format, Version)
	}
	if f.Version != 0 && f.Version != Version {
		return fmt.Errorf("format %s version %d: this stackshot reads version %d (use a newer stackshot)", Format, f.Version, Version)
	}
	return nil
}

func decodeProcesses(dec *json.Decoder, g *guard, f *File) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("processes: want an array")
	}
	for dec.More() {
		if len(f.Processes) >= MaxProcesses {
			return fmt.Errorf("%w: more than %d processes", ErrLimit, MaxProcesses)
		}
		g.process = 0
		var p ptrace.Process
		if err := dec.Decode(&p); err != nil {
			return err
		}
		if err := checkProcess(&p); err != nil {
			return err
		}
		f.Processes = append(f.Processes, &p)
	}
	_, err = dec.Token() // ']'
	return err
}

// checkProcess applies what the JSON decoder cannot: the architecture and
// the register count.
func checkProcess(p *ptrace.Process) error {
	want := 0
	switch p.Arch {
	case arch.AMD64:
		want = arch.UserRegsCount
	case arch.ARM64:
		want = arch.ARM64UserRegsCount
	default:
		return fmt.Errorf("a capture of architecture %q: not supported (this stackshot reads %s and %s)", p.Arch, arch.AMD64, arch.ARM64)
	}
	for i := range p.Threads {
		th := &p.Threads[i]
		if n := len(th.Regs); n != 0 && n != want {
			return fmt.Errorf("thread %d: %d registers, want %d", th.TID, n, want)
		}
	}
	return nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, found %v", want, tok)
	}
	return nil
}

// guard sits between the decompressor and the JSON decoder. It scans the
// JSON's structure as the bytes pass (strings, nesting, object and element
// counts) and fails the read as soon as a limit is crossed, so the decoder
// never holds or allocates for more than the limits allow.
type guard struct {
	r       io.Reader
	budget  int64 // decompressed bytes left
	process int64 // bytes of the current process
	err     error

	inString, escape bool
	depth            int
	objects          int
	elements         int
}

func (g *guard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if int64(len(p)) > g.budget+1 {
		p = p[:g.budget+1]
	}
	n, err := g.r.Read(p)
	for _, c := range p[:n] {
		if g.inString {
			switch {
			case g.escape:
				g.escape = false
			case c == '\\':
				g.escape = true
			case c == '"':
				g.inString = false
			}
			continue
		}
		switch c {
		case '"':
			g.inString = true
		case '{', '[':
			g.depth++
			if g.depth > MaxDepth {
				g.err = fmt.Errorf("%w: nesting deeper than %d", ErrLimit, MaxDepth)
			}
			if c == '{' {
				g.objects++
				if g.objects > MaxObjects {
					g.err = fmt.Errorf("%w: more than %d objects", ErrLimit, MaxObjects)
				}
			}
		case '}', ']':
			g.depth--
		case ',':
			g.elements++
			if g.elements > MaxElements {
				g.err = fmt.Errorf("%w: more than %d elements", ErrLimit, MaxElements)
			}
		}
	}
	g.budget -= int64(n)
	g.process += int64(n)
	if g.budget < 0 {
		g.err = fmt.Errorf("%w: more than %d MiB decompressed", ErrLimit, MaxDecompressed>>20)
	} else if g.process > MaxProcessJSON {
		g.err = fmt.Errorf("%w: a process of more than %d MiB", ErrLimit, MaxProcessJSON>>20)
	}
	if g.err != nil {
		return 0, g.err
	}
	return n, err
}

// explain prefers the guard's own error (a limit) over the decoder's
// report of a failed read.
func (g *guard) explain(err error) error {
	if g.err != nil {
		return g.err
	}
	if errors.Is(err, ErrLimit) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("corrupt capture: truncated")
	}
	return fmt.Errorf("corrupt capture: %v", err)
}

// jsonDecode decodes one JSON value from a guarded reader.
func jsonDecode(g *guard, v any) error {
	return json.NewDecoder(g).Decode(v)
}
