//go:build linux

package main

// An aarch64 core as Linux writes it (NT_PRSTATUS, NT_PRPSINFO,
// NT_SIGINFO, NT_FILE naming each file mapping, the first page of the
// executable's mapping, the stack): no arm64 kernel is at hand here, so
// the core is built by hand around a real aarch64 program
// (testdata/targets/arm64/chain.c) whose call sites come from
// aarch64-linux-gnu-objdump.

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// arm64CallSites returns, from objdump's disassembly of exe, each
// function's address and the return address of its call to each callee
// (caller/callee -> address after the bl).
func arm64CallSites(t *testing.T, exe string) (fns map[string]uint64, rets map[string]uint64) {
	t.Helper()
	testutil.Need(t, "aarch64-linux-gnu-objdump")
	out, err := exec.Command("aarch64-linux-gnu-objdump", "-d", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	fnRe := regexp.MustCompile(`^([0-9a-f]+) <([^>]+)>:$`)
	blRe := regexp.MustCompile(`^\s*([0-9a-f]+):\s+[0-9a-f]{8}\s+bl\s+[0-9a-f]+ <([^>+]+)>$`)
	fns, rets = map[string]uint64{}, map[string]uint64{}
	cur := ""
	for _, l := range strings.Split(string(out), "\n") {
		if m := fnRe.FindStringSubmatch(l); m != nil {
			cur = m[2]
			fns[cur], _ = strconv.ParseUint(m[1], 16, 64)
		} else if m := blRe.FindStringSubmatch(l); m != nil {
			a, _ := strconv.ParseUint(m[1], 16, 64)
			rets[cur+"/"+m[2]] = a + 4
		}
	}
	return fns, rets
}

// arm64KernelCore writes an aarch64 core of one thread stopped in c3 (a
// leaf: its return address in x30) under c2, c1 and main (frame records
// on the stack), whose NT_FILE names exe's mappings as path.
func arm64KernelCore(t *testing.T, exe, path string, fns, rets map[string]uint64) string {
	t.Helper()
	le := binary.LittleEndian
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	const stackLo, stackSize = 0x7ffff000_0000, 0x2000
	stack := make([]byte, stackSize)
	sp := uint64(stackLo + 0x1000)
	recC2, recC1, recMain := sp+0x20, sp+0x40, sp+0x60
	put := func(addr, v uint64) { le.PutUint64(stack[addr-stackLo:], v) }
	put(recC2, recC1)
	put(recC2+8, rets["c1/c2"])
	put(recC1, recMain)
	put(recC1+8, rets["main/c1"])
	put(recMain, 0)
	put(recMain+8, 0)

	// NT_FILE: the executable's PT_LOADs, as the kernel lists them.
	var ents, names []byte
	var first []byte // the first page of the executable's first mapping
	var firstAt uint64
	n := 0
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		start := p.Vaddr &^ 0xfff
		end := (p.Vaddr + p.Memsz + 0xfff) &^ 0xfff
		ents = le.AppendUint64(le.AppendUint64(le.AppendUint64(ents, start), end), (p.Off&^0xfff)/4096)
		names = append(append(names, path...), 0)
		if n == 0 {
			first = make([]byte, 4096)
			p.ReadAt(first[p.Off&0xfff:], 0)
			firstAt = start
		}
		n++
	}
	file := le.AppendUint64(le.AppendUint64(nil, uint64(n)), 4096)
	file = append(append(file, ents...), names...)

	regs := make([]byte, 392)     // struct elf_prstatus, aarch64
	le.PutUint16(regs[12:], 11)   // pr_cursig: SIGSEGV
	le.PutUint32(regs[32:], 4242) // pr_pid
	r := func(i int, v uint64) { le.PutUint64(regs[112+8*i:], v) }
	r(29, recC2)
	r(30, rets["c2/c3"])
	r(31, sp)
	r(32, fns["c3"]+8)
	psinfo := make([]byte, 136)
	le.PutUint32(psinfo[24:], 4242)
	copy(psinfo[40:], "chain")
	siginfo := make([]byte, 128)
	le.PutUint32(siginfo, 11)

	var notes []byte
	note := func(name string, typ uint32, desc []byte) {
		notes = le.AppendUint32(notes, uint32(len(name)+1))
		notes = le.AppendUint32(notes, uint32(len(desc)))
		notes = le.AppendUint32(notes, typ)
		notes = append(notes, name...)
		for notes = append(notes, 0); len(notes)%4 != 0; {
			notes = append(notes, 0)
		}
		for notes = append(notes, desc...); len(notes)%4 != 0; {
			notes = append(notes, 0)
		}
	}
	note("CORE", 1, regs)             // NT_PRSTATUS
	note("CORE", 3, psinfo)           // NT_PRPSINFO
	note("CORE", 0x53494749, siginfo) // NT_SIGINFO
	note("CORE", 0x46494c45, file)    // NT_FILE

	// ELF header, 3 program headers (notes, first page, stack), data.
	const phoff, phnum = 64, 3
	dataOff := uint64(phoff + 56*phnum)
	var b bytes.Buffer
	eh := make([]byte, 64)
	copy(eh, elf.ELFMAG)
	eh[elf.EI_CLASS], eh[elf.EI_DATA], eh[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	le.PutUint16(eh[16:], uint16(elf.ET_CORE))
	le.PutUint16(eh[18:], uint16(elf.EM_AARCH64))
	le.PutUint32(eh[20:], 1)
	le.PutUint64(eh[32:], phoff)
	le.PutUint16(eh[52:], 64)
	le.PutUint16(eh[54:], 56)
	le.PutUint16(eh[56:], phnum)
	b.Write(eh)
	ph := func(typ elf.ProgType, flags elf.ProgFlag, off, vaddr, filesz, memsz uint64) {
		p := make([]byte, 56)
		le.PutUint32(p, uint32(typ))
		le.PutUint32(p[4:], uint32(flags))
		le.PutUint64(p[8:], off)
		le.PutUint64(p[16:], vaddr)
		le.PutUint64(p[32:], filesz)
		le.PutUint64(p[40:], memsz)
		le.PutUint64(p[48:], 1)
		b.Write(p)
	}
	ph(elf.PT_NOTE, 0, dataOff, 0, uint64(len(notes)), 0)
	ph(elf.PT_LOAD, elf.PF_R|elf.PF_X, dataOff+uint64(len(notes)), firstAt, 4096, 4096)
	ph(elf.PT_LOAD, elf.PF_R|elf.PF_W, dataOff+uint64(len(notes))+4096, stackLo, stackSize, stackSize)
	b.Write(notes)
	b.Write(first)
	b.Write(stack)
	core := filepath.Join(t.TempDir(), "chain.core")
	if err := os.WriteFile(core, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return core
}

// TestReportARM64KernelCore: an aarch64 core with NT_FILE is read with
// its files found under --sysroot (by the names NT_FILE gives), walked
// from a leaf's link register through frame records, and a file of
// another machine found for a module is refused by name.
func TestReportARM64KernelCore(t *testing.T) {
	testutil.Need(t, "aarch64-linux-gnu-gcc")
	exe := testutil.Build(t, "aarch64-linux-gnu-gcc", []string{testutil.Testdata("targets", "arm64", "chain.c")},
		"-O0", "-fno-omit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-static")
	fns, rets := arm64CallSites(t, exe)
	for _, k := range []string{"c3", "main"} {
		if fns[k] == 0 {
			t.Fatalf("objdump shows no %s", k)
		}
	}
	for _, k := range []string{"c2/c3", "c1/c2", "main/c1"} {
		if rets[k] == 0 {
			t.Fatalf("objdump shows no call %s", k)
		}
	}
	const path = "/opt/stackshot-arm64-test/chain"
	sysroot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(sysroot, filepath.Dir(path)), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sysroot, path), data, 0o755); err != nil {
		t.Fatal(err)
	}

	p := reportCore(t, "--sysroot", sysroot, arm64KernelCore(t, exe, path, fns, rets))
	if len(p.Threads) != 1 {
		t.Fatalf("%d threads, want 1", len(p.Threads))
	}
	var got []string
	for _, f := range physFrames(p.Threads[0]) {
		got = append(got, f.String())
	}
	want := []string{
		strconv.FormatUint(fns["c3"]+8, 16), strconv.FormatUint(rets["c2/c3"], 16),
		strconv.FormatUint(rets["c1/c2"], 16), strconv.FormatUint(rets["main/c1"], 16),
	}
	for i, fn := range []string{"c3", "c2", "c1", "main"} {
		want[i] = "0x" + want[i] + " " + fn
	}
	if len(got) < 4 || !slices.Equal(got[:4], want) {
		t.Errorf("chain %v\nwant %v (then main's caller, unknown)", got, want)
	}

	// The same core naming the host's x86-64 libc for those mappings.
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		testutil.Skip(t, libc+" is not on this machine")
	}
	out, errOut, code := runSS(t, "report", "--sysroot", "/", arm64KernelCore(t, exe, libc, fns, rets))
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	if w := "module " + libc + ": the file found is for EM_X86_64, the capture is of arm64"; !strings.Contains(out+errOut, w) {
		t.Errorf("no %q in\n%s%s", w, out, errOut)
	}
}
