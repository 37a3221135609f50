package capfile

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/arch"
	"stackshot/procmaps"
	"stackshot/ptrace"
)

// sampleProcess is a small capture: an executable and a libc mapping, a
// thread stack, two threads (one stopped, one read without a stop).
func sampleProcess() *ptrace.Process {
	regs := make([]uint64, arch.UserRegsCount)
	regs[arch.UserRIP], regs[arch.UserRSP], regs[arch.UserRBP] = 0x401234, 0x7ffd0010, 0x7ffd0100
	stack := bytes.Repeat([]byte{0xab}, 0x200)
	return &ptrace.Process{
		Arch: arch.AMD64, PID: 100, Comm: "sample", Exe: "/usr/bin/sample", State: "S",
		Auxv: []byte{3, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0x40, 0, 0, 0, 0, 0},
		Maps: []procmaps.Mapping{
			{Start: 0x400000, End: 0x401000, Perms: "r--p", Path: "/usr/bin/sample", Kind: procmaps.KindFile},
			{Start: 0x401000, End: 0x402000, Perms: "r-xp", Offset: 0x1000, Path: "/usr/bin/sample", Kind: procmaps.KindFile},
			{Start: 0x7f0000000000, End: 0x7f0000100000, Perms: "r-xp", Path: "/lib/libc.so.6", Kind: procmaps.KindFile},
			{Start: 0x7ffd0000, End: 0x7ffe0000, Perms: "rw-p", Path: "[stack]", Kind: procmaps.KindStack},
		},
		Threads: []ptrace.Thread{
			{TID: 101, Name: "worker", Method: ptrace.MethodNoStop, StackAddr: 0x7ffd8000, Stack: stack[:0x100],
				Syscall:     &procmaps.Syscall{InCall: true, Nr: 0, SP: 0x7ffd8000, PC: 0x7f0000001234, Args: [6]uint64{3, 4, 5}},
				KernelStack: []procmaps.KernelFrame{{Addr: 0xffffffff81000000, Function: "pipe_read", Offset: 0x10}}},
			{TID: 100, Name: "sample", Method: ptrace.MethodPtrace, Regs: regs, StackAddr: 0x7ffd0010, Stack: stack},
		},
	}
}

func writeSample(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteCore(&b, sampleProcess(), CoreOptions{Host: "h", Kernel: true}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCoreWrittenIsELF checks the core with the standard library's ELF
// reader: type, machine, notes in the kernel's order, segments.
func TestCoreWrittenIsELF(t *testing.T) {
	data := writeSample(t)
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != elf.ET_CORE || f.Machine != elf.EM_X86_64 {
		t.Fatalf("type %v machine %v", f.Type, f.Machine)
	}
	var types []uint32
	var loads []*elf.Prog
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_NOTE:
			b := make([]byte, p.Filesz)
			p.ReadAt(b, 0)
			ns, err := parseNotes(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range ns {
				types = append(types, n.typ)
			}
		case elf.PT_LOAD:
			loads = append(loads, p)
			if p.Vaddr%pageSize != 0 || p.Off%pageSize != 0 {
				t.Errorf("PT_LOAD at %#x offset %#x: not page aligned", p.Vaddr, p.Off)
			}
		}
	}
	// The main thread first, then the process notes, then the others.
	want := []uint32{ntPrstatus, ntPrpsinfo, ntAuxv, ntFile, ntPrstatus, ntStackshot}
	if len(types) != len(want) {
		t.Fatalf("note types %x, want %x", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("note types %x, want %x", types, want)
		}
	}
	// Two stack windows, each padded to whole pages.
	if len(loads) != 2 {
		t.Fatalf("%d PT_LOADs, want 2", len(loads))
	}
	b := make([]byte, 0x200)
	loads[0].ReadAt(b, 0x10)
	if b[0] != 0xab || b[0x1ff] != 0xab {
		t.Errorf("stack bytes not at their address")
	}
}

func TestCoreRoundTripSample(t *testing.T) {
	data := writeSample(t)
	c, err := ReadCore(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Process
	if p.PID != 100 || p.Comm != "sample" || len(p.Threads) != 2 || !c.Kernel {
		t.Fatalf("pid %d comm %q threads %d kernel %v", p.PID, p.Comm, len(p.Threads), c.Kernel)
	}
	w := p.Threads[0]
	if w.Name != "worker" || w.Method != ptrace.MethodNoStop || len(w.Stack) != 0x100 || len(w.KernelStack) != 1 {
		t.Errorf("worker: %+v", w)
	}
	m := p.Threads[1]
	if len(m.Regs) != arch.UserRegsCount || m.Regs[arch.UserRIP] != 0x401234 || len(m.Stack) != 0x200 || m.Stack[0] != 0xab {
		t.Errorf("main thread: regs %v stack %d", m.Regs, len(m.Stack))
	}
}

// TestCoreOfOtherTools reads a core without stackshot's note (as gcore and
// the kernel write them): threads from NT_PRSTATUS, maps from NT_FILE.
func TestCoreOfOtherTools(t *testing.T) {
	data := writeSample(t)
	i := bytes.Index(data, []byte(noteStackshot))
	copy(data[i:], "XTACKSHOT")
	c, err := ReadCore(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Process
	if p.PID != 100 || len(p.Threads) != 2 || p.Threads[0].TID != 100 {
		t.Fatalf("pid %d threads %+v", p.PID, p.Threads)
	}
	main, worker := p.Threads[0], p.Threads[1]
	if main.Regs[arch.UserRIP] != 0x401234 || main.Regs[arch.UserRBP] != 0x7ffd0100 || len(main.Stack) == 0 {
		t.Errorf("main: %+v", main)
	}
	// The thread read without a stop: PC, SP and the arguments.
	if worker.Regs[arch.UserRIP] != 0x7f0000001234 || worker.Regs[arch.UserRSP] != 0x7ffd8000 || worker.Regs[arch.UserRDI] != 3 {
		t.Errorf("worker regs %x", worker.Regs)
	}
	var files []string
	for _, m := range p.Maps {
		if m.Kind == procmaps.KindFile {
			files = append(files, m.Path)
		}
	}
	if strings.Join(files, " ") != "/usr/bin/sample /usr/bin/sample /lib/libc.so.6" {
		t.Errorf("file maps %v", files)
	}
	if p.Maps[1].Offset != 0x1000 {
		t.Errorf("offset %#x", p.Maps[1].Offset)
	}
}

// TestCoreBadInput: every malformed core gives an error that says what is
// wrong, never a panic.
func TestCoreBadInput(t *testing.T) {
	good := writeSample(t)
	le := binary.LittleEndian
	phdr := func(b []byte, i int) []byte { return b[64+56*i:] }
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated ELF header"},
		{"header only", good[:64], "program headers"},
		{"not ELF", []byte(strings.Repeat("x", 100)), "not a stackshot capture"},
		{"ppc64le", mod(func(b []byte) { le.PutUint16(b[18:], uint16(elf.EM_PPC64)) }), "a core of ppc64le programs (EM_PPC64, ELFCLASS64, ELFDATA2LSB): not supported"},
		{"i386", mod(func(b []byte) {
			b[elf.EI_CLASS] = byte(elf.ELFCLASS32)
			le.PutUint16(b[18:], uint16(elf.EM_386))
		}), "a core of i386 programs (EM_386, ELFCLASS32, ELFDATA2LSB): not supported"},
		{"s390x", mod(func(b []byte) {
			b[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
			binary.BigEndian.PutUint16(b[16:], uint16(elf.ET_CORE))
			binary.BigEndian.PutUint16(b[18:], uint16(elf.EM_S390))
		}), "a core of s390x programs (EM_S390, ELFCLASS64, ELFDATA2MSB): not supported"},
		{"executable", mod(func(b []byte) { le.PutUint16(b[16:], uint16(elf.ET_EXEC)) }), "not a core"},
		{"phnum lies", mod(func(b []byte) { le.PutUint16(b[56:], 0xffff) }), "outside"},
		{"note size lies", mod(func(b []byte) {
			off := le.Uint64(phdr(b, 0)[8:])
			le.PutUint32(b[off+4:], 0xfffffff0) // first note's descsz
		}), "runs past"},
		{"note segment past end", mod(func(b []byte) { le.PutUint64(phdr(b, 0)[32:], 1<<40) }), "past the end"},
		{"overlapping loads", mod(func(b []byte) {
			le.PutUint64(phdr(b, 2)[16:], le.Uint64(phdr(b, 1)[16:])+0x10)
		}), "overlapping PT_LOAD"},
		{"filesz over memsz", mod(func(b []byte) { le.PutUint64(phdr(b, 1)[40:], 1) }), "over memory size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadCore(bytes.NewReader(c.data), int64(len(c.data)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestCoreTruncated: a core cut anywhere reads as an error or, when only
// memory is missing, as a capture with a warning.
func TestCoreTruncated(t *testing.T) {
	good := writeSample(t)
	for n := 0; n < len(good); n += 97 {
		c, err := ReadCore(bytes.NewReader(good[:n]), int64(n))
		if err == nil && len(c.Warnings) == 0 && n < len(good)-pageSize {
			t.Errorf("cut at %d of %d: no error, no warning", n, len(good))
		}
		if err != nil && !errors.Is(err, ErrCoreFormat) {
			t.Errorf("cut at %d: %v is not a format error", n, err)
		}
	}
}

// TestImageFirstWins: overlapping ranges keep the bytes added first (the
// stack windows, copied while the thread was stopped).
func TestImageFirstWins(t *testing.T) {
	var im image
	im.add(0x1000, bytes.Repeat([]byte{1}, 0x100))
	im.add(0x0f80, bytes.Repeat([]byte{2}, 0x200))
	im.add(0x1080, bytes.Repeat([]byte{3}, 0x10))
	got := map[uint64]byte{}
	total := 0
	for _, s := range im.segs {
		for i, b := range s.Data {
			got[s.Addr+uint64(i)] = b
		}
		total += len(s.Data)
	}
	if total != 0x200 || got[0x0f80] != 2 || got[0x1000] != 1 || got[0x10ff] != 1 || got[0x1100] != 2 || got[0x1080] != 1 {
		t.Errorf("total %#x, bytes %d %d %d %d", total, got[0x0f80], got[0x1000], got[0x1100], got[0x1080])
	}
}

// FuzzCore feeds ReadCore a core WriteCore made (testdata/sample.core, of
// a sample capture) with a patch of at most 256 bytes written at offset
// off (past its end: longer): an error or a capture, never a panic. An
// input is the patch, not the 12 KiB core: small, so that the fuzzer
// minimises a new one in moments (whole cores as inputs showed 8
// executions in 10 s, the rest of the time spent minimising).
func FuzzCore(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("testdata", "sample.core"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint16(0), []byte{})
	for _, at := range []int{0, 0x40, 0x80} { // (the ELF header, the first program headers)
		f.Add(uint16(at), bytes.Clone(seed[at:at+64]))
	}
	var work []byte
	f.Fuzz(func(t *testing.T, off uint16, patch []byte) {
		if len(patch) > 256 {
			return
		}
		work = append(work[:0], seed...)
		at := int(off) % len(work)
		n := copy(work[at:], patch)
		work = append(work, patch[n:]...)
		c, err := ReadCore(bytes.NewReader(work), int64(len(work)))
		if err == nil && (c.Process == nil || len(c.Process.Threads) == 0) {
			t.Errorf("accepted a core without threads")
		}
	})
}

// TestWriteFuzzSeed keeps testdata/sample.core in step with WriteCore
// (STACKSHOT_UPDATE_SEEDS=1 rewrites it).
func TestWriteFuzzSeed(t *testing.T) {
	path := filepath.Join("testdata", "sample.core")
	data := writeSample(t)
	if os.Getenv("STACKSHOT_UPDATE_SEEDS") != "" {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCore(bytes.NewReader(old), int64(len(old))); err != nil {
		t.Errorf("the fuzz seed no longer reads: %v", err)
	}
}
