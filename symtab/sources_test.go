package symtab

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"stackshot/internal/testutil"
	"strconv"
	"strings"
	"testing"
)

// crateFuncPCs returns every byte address of the functions of our own
// crate/program in file (per nm -C), keyed by demangled name.
func userPCs(t testing.TB, file string, keep func(string) bool) []uint64 {
	return funcPCs(t, file, keep)
}

func sectionBytes(t testing.TB, file, name string) []byte {
	t.Helper()
	ef, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	s := ef.Section(name)
	if s == nil {
		t.Fatalf("%s has no %s", file, name)
	}
	b, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var rustHash = regexp.MustCompile(`::h[0-9a-f]{16}`)

// TestRust: names demangled (legacy and v0 mangling) without hash, and
// file:line and inline frames as addr2line says, for the functions of the
// test crate.
func TestRust(t *testing.T) {
	skipWithout(t, "rustc", "nm", "addr2line")
	// rustc's default is legacy mangling and DWARF 4; v0 and LLVM's
	// DWARF 5 (strx/addrx forms, .debug_str_offsets, .debug_addr) are
	// asked for.
	for _, variant := range []string{"legacy", "v0", "v0-dwarf5"} {
		mangling := strings.TrimSuffix(variant, "-dwarf5")
		t.Run(variant, func(t *testing.T) {
			args := []string{"rustc", "-g", "-C", "opt-level=1", "-o", "$OUT", "$SRC/rsprog.rs"}
			if mangling == "v0" {
				args = append(args, "-C", "symbol-mangling-version=v0")
			}
			if strings.HasSuffix(variant, "-dwarf5") {
				if v := rustcMinor(t); v < 88 {
					testutil.Skip(t, fmt.Sprintf("rustc 1.%d cannot emit DWARF 5 (-C dwarf-version is stable from 1.88)", v))
				}
				args = append(args, "-C", "dwarf-version=5")
			}
			bin := artifact(t, "rsprog-"+variant, args)
			s := New(Options{})
			defer s.Close()
			m := openFileModule(t, s, bin)
			mine := func(n string) bool { return strings.Contains(n, "rsprog::") }
			pcs := userPCs(t, bin, mine)
			if len(pcs) < 50 {
				t.Fatalf("only %d pcs of rsprog functions", len(pcs))
			}
			// binutils 2.40 misreads LLVM's DWARF 5 (file 0, some inline
			// levels): the reference for the DWARF 5 build is addr2line
			// on its DWARF 4 twin, whose code is the same (checked).
			ref := bin
			if strings.HasSuffix(variant, "-dwarf5") {
				ref = artifact(t, "rsprog-"+mangling, []string{"rustc", "-g", "-C", "opt-level=1", "-o", "$OUT", "$SRC/rsprog.rs",
					"-C", "symbol-mangling-version=" + mangling})
				if !bytes.Equal(sectionBytes(t, bin, ".text"), sectionBytes(t, ref, ".text")) {
					t.Fatal("DWARF 5 and DWARF 4 builds differ in .text")
				}
			}
			compareWithAddr2line(t, m, ref, true, pcs)
			names := map[string]bool{}
			for _, pc := range pcs {
				for _, f := range m.Lookup(pc, nil) {
					names[f.Function] = true
					if rustHash.MatchString(f.Function) {
						t.Errorf("%#x: %q keeps the hash", pc, f.Function)
					}
				}
			}
			// Legacy mangling carries no generic arguments, v0 does.
			wants := []string{"rsprog::main", "rsprog::shapes::total", "<rsprog::shapes::Square as rsprog::shapes::Area>::area"}
			if mangling == "v0" {
				wants[1] = "rsprog::shapes::total::<rsprog::shapes::Square>"
			}
			for _, want := range wants {
				if !names[want] {
					t.Errorf("no frame named %q; have %v", want, keys(names))
				}
			}
		})
	}
}

// TestGoStripped: a Go binary linked with -s -w has neither .symtab nor
// DWARF; names, files and lines come from .gopclntab. Expected values come
// from nm and gdb (binutils 2.40's addr2line misreads Go's DWARF) on the
// same program linked without -s -w, whose code is laid out the same
// (checked).
func TestGoStripped(t *testing.T) {
	t.Run("goprog", func(t *testing.T) { testGoStripped(t, "goprog", "") })
	// cgo, external linking, PIE: runtime.text is past the start of .text
	// and moduledata's pointers are relocations.
	t.Run("cgoprog-pie", func(t *testing.T) { testGoStripped(t, "cgoprog", "-buildmode=pie") })
}

func testGoStripped(t *testing.T, prog, mode string) {
	skipWithout(t, "go", "gcc", "nm", "gdb")
	stripped := artifact(t, prog+"-sw", sh(`cd $SRC/`+prog+` && go build `+mode+` -ldflags="-s -w" -o $OUT .`))
	full := artifact(t, prog+"-full", sh(`cd $SRC/`+prog+` && go build `+mode+` -o $OUT .`))
	textOf := func(f string) []byte {
		ef, err := elf.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		defer ef.Close()
		b, err := ef.Section(".text").Data()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The linker lays out code identically; only some data displacements
	// differ (-s -w moves a little read-only data). A moved function would
	// change the size or a large share of the bytes.
	a, b := textOf(stripped), textOf(full)
	diff := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			diff++
		}
	}
	if len(a) != len(b) || diff > len(a)/100 {
		t.Fatalf("-s -w changed .text (%d vs %d bytes, %d differ): the unstripped twin cannot serve as the reference", len(a), len(b), diff)
	}
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, stripped)
	if src := m.SymbolSources(); len(src) == 0 || src[0] != "gopclntab" || strings.Contains(strings.Join(src, ","), "symtab") {
		t.Errorf("sources = %v, want gopclntab and no symtab", src)
	}
	checkGo(t, m, full)
	if prog == "goprog" {
		checkGoInlineChain(t, m, full)
	}

	if mode != "" {
		return
	}
	// The same with the section headers gone: the pclntab is found by its
	// header in the read-only segment.
	noSec := filepath.Join(t.TempDir(), "goprog-nosections")
	b, err := os.ReadFile(stripped)
	if err != nil {
		t.Fatal(err)
	}
	// e_shoff (0x28, 8 bytes), e_shnum (0x3c), e_shstrndx (0x3e) of ELF64.
	binary.LittleEndian.PutUint64(b[0x28:], 0)
	binary.LittleEndian.PutUint16(b[0x3c:], 0)
	binary.LittleEndian.PutUint16(b[0x3e:], 0)
	if err := os.WriteFile(noSec, b, 0o755); err != nil {
		t.Fatal(err)
	}
	m2 := openFileModule(t, New(Options{}), noSec)
	checkGo(t, m2, full)
	checkGoInlineChain(t, m2, full)
}

func checkGo(t *testing.T, m *Module, reference string) {
	t.Helper()
	keep := func(n string) bool { return strings.HasPrefix(n, "main.") }
	pcs := funcPCs(t, reference, keep)
	if len(pcs) < 100 {
		t.Fatalf("only %d pcs in main.*", len(pcs))
	}
	nm := runNM(t, reference, false)
	want := gdbLines(t, reference, pcs)
	bad, inlined := 0, 0
	for i, pc := range pcs {
		got := m.Lookup(pc, nil)
		var fn string
		for _, s := range nm {
			if isFuncType(s.typ) && s.hasSize && pc >= s.addr && pc < s.addr+s.size {
				// The ELF symbol of an ABI0 function (cgo's stubs)
				// carries a suffix the pclntab name has not.
				fn = strings.TrimSuffix(s.name, ".abi0")
			}
		}
		// The physical function is nm's; the innermost position is
		// gdb's; frames above the last are inlined calls.
		w := want[i]
		ok := len(got) > 0 && got[len(got)-1].Function == fn && !got[len(got)-1].Inlined &&
			filepath.Clean(got[0].File) == filepath.Clean(w.file) && got[0].Line == w.line
		for k := 0; ok && k < len(got)-1; k++ {
			ok = got[k].Inlined && got[k].Function != ""
		}
		if len(got) > 1 {
			inlined++
		}
		if !ok {
			bad++
			if bad < 10 {
				t.Errorf("%#x: got %+v, want %s with innermost %s:%d (nm, gdb)", pc, got, fn, w.file, w.line)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d pcs differ", bad, len(pcs))
	}
	if inlined == 0 {
		t.Error("no pc of main.* resolved to inlined frames")
	}
}

// checkGoInlineChain: in goprog, mix is inlined into (*walker).step; some
// pc of step must resolve to mix at its loop body's line, called from
// step's line that calls it (lines found in the source).
func checkGoInlineChain(t *testing.T, m *Module, reference string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(srcDir(t), "goprog", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	bodyLine, callLine := 0, 0
	for i, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "// mix body") {
			bodyLine = i + 1
		}
		if strings.Contains(l, "// step calls mix") {
			callLine = i + 1
		}
	}
	step := nmFind(t, runNM(t, reference, false), "main.(*walker).step")
	found := false
	for pc := step.addr; pc < step.addr+step.size && !found; pc++ {
		f := m.Lookup(pc, nil)
		found = len(f) == 2 && f[0].Function == "main.mix" && f[0].Line == bodyLine && f[0].Inlined &&
			f[1].Function == "main.(*walker).step" && f[1].Line == callLine && !f[1].Inlined &&
			strings.HasSuffix(f[1].File, "goprog/main.go") && f[1].Offset == pc-step.addr
	}
	if !found {
		t.Errorf("no pc of main.(*walker).step resolves to main.mix:%d inlined at step:%d", bodyLine, callLine)
	}
}

// miniDebugInfoBinary makes a stripped binary with .gnu_debugdata the way
// Fedora's find-debuginfo does.
func miniDebugInfoBinary(t testing.TB) (orig, stripped string) {
	skipWithout(t, "gcc", "nm", "objcopy", "strip", "xz", "sh")
	orig = cprog(t, true)
	stripped = artifact(t, "cprog-minidebug", sh(`set -e
B=`+orig+`; W=$DIR/minidebug.work; rm -rf $W; mkdir $W
nm -D $B --format=posix --defined-only | awk '{ print $1 }' | sort > $W/dynsyms
nm $B --format=posix --defined-only | awk '{ if ($2 == "T" || $2 == "t" || $2 == "D") print $1 }' | sort > $W/funcsyms
comm -13 $W/dynsyms $W/funcsyms > $W/keep_symbols
objcopy --only-keep-debug $B $W/debug
objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols=$W/keep_symbols $W/debug $W/mini_debuginfo
strip --strip-all -R .comment -o $OUT $B
xz --threads=1 $W/mini_debuginfo
objcopy --add-section .gnu_debugdata=$W/mini_debuginfo.xz $OUT`))
	return orig, stripped
}

func TestGnuDebugdata(t *testing.T) {
	orig, stripped := miniDebugInfoBinary(t)
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, stripped)
	src := strings.Join(m.SymbolSources(), ",")
	if !strings.Contains(src, "gnu_debugdata") || strings.Contains(src, "dwarf") {
		t.Errorf("sources = %s, want gnu_debugdata and no dwarf", src)
	}
	for _, name := range []string{"prog_local", "prog_global", "main"} {
		sym := nmFind(t, runNM(t, orig, false), name)
		if got := lookupName(m, sym.addr+1); got != name {
			t.Errorf("%s: got %q", name, got)
		}
	}
}

// splitDebug makes stripped copies of the PIE C program: one whose debug
// file exists only in a build-id tree, one with a .gnu_debuglink.
func TestDebugFileByBuildID(t *testing.T) {
	skipWithout(t, "objcopy", "strip")
	orig := cprog(t, true)
	id := readelfBuildID(t, orig)
	dir := t.TempDir()
	debugRoot := filepath.Join(dir, "debugroot")
	dbg := filepath.Join(debugRoot, ".build-id", id[:2], id[2:]+".debug")
	bin := filepath.Join(dir, "bin", "cprog")
	for _, c := range [][]string{
		{"mkdir", "-p", filepath.Dir(dbg), filepath.Dir(bin)},
		{"objcopy", "--only-keep-debug", orig, dbg},
		{"strip", "--strip-all", "-o", bin, orig},
	} {
		if o, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, o)
		}
	}
	// Without the debug dir: .dynsym only.
	s0 := New(Options{})
	defer s0.Close()
	if src := openFileModule(t, s0, bin).SymbolSources(); strings.Contains(strings.Join(src, ","), "dwarf") {
		t.Fatalf("found DWARF without the debug dir: %v", src)
	}
	s := New(Options{DebugDirs: []string{debugRoot}})
	defer s.Close()
	m := openFileModule(t, s, bin)
	if m.DebugFile() != dbg || m.DebugELF() == nil {
		t.Fatalf("DebugFile = %q, want %q", m.DebugFile(), dbg)
	}
	compareWithAddr2line(t, m, orig, true, funcPCs(t, orig, func(n string) bool { return strings.HasPrefix(n, "prog_") || n == "main" }))
}

func TestDebugFileByDebuglink(t *testing.T) {
	skipWithout(t, "objcopy", "strip")
	orig := cprog(t, false)
	pcs := funcPCs(t, orig, func(n string) bool { return strings.HasPrefix(n, "prog_") || n == "main" })
	for _, where := range []string{"next", ".debug", "debugdir", "badcrc"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin", "cprog")
			debugRoot := filepath.Join(dir, "debugroot")
			var dbg string
			switch where {
			case "next", "badcrc":
				dbg = filepath.Join(dir, "bin", "cprog.debug")
			case ".debug":
				dbg = filepath.Join(dir, "bin", ".debug", "cprog.debug")
			case "debugdir":
				dbg = filepath.Join(debugRoot, dir, "bin", "cprog.debug")
			}
			tmpDbg := filepath.Join(dir, "cprog.debug")
			steps := [][]string{
				{"mkdir", "-p", filepath.Dir(dbg), filepath.Dir(bin)},
				{"objcopy", "--only-keep-debug", "--remove-section=.note.gnu.build-id", orig, tmpDbg},
				{"strip", "--strip-all", "--remove-section=.note.gnu.build-id", "-o", bin, orig},
				{"objcopy", "--add-gnu-debuglink=" + tmpDbg, bin},
				{"mv", tmpDbg, dbg},
			}
			if where == "badcrc" {
				steps = append(steps, []string{"sh", "-c", "printf X >> " + dbg})
			}
			for _, c := range steps {
				if o, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
					t.Fatalf("%v: %v\n%s", c, err, o)
				}
			}
			s := New(Options{DebugDirs: []string{debugRoot}})
			defer s.Close()
			m := openFileModule(t, s, bin)
			if m.BuildID() != "" {
				t.Fatalf("build id %q left in: the build-id path would be used", m.BuildID())
			}
			if where == "badcrc" {
				if m.DebugFile() != "" {
					t.Fatalf("used %s despite its CRC", m.DebugFile())
				}
				return
			}
			if m.DebugFile() != dbg {
				t.Fatalf("DebugFile = %q, want %q", m.DebugFile(), dbg)
			}
			compareWithAddr2line(t, m, orig, true, pcs)
		})
	}
}

func TestPerfMap(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "perf.map")
	text := "7f0000001000 100 jit_alpha\n7f0000001200 0x80 LambdaForm$MH/0x0000000800c0d000.invoke(Object)\nbogus line\n7f0000001400 40 jit gamma with spaces\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	pm, err := LoadPerfMap(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		name string
		off  uint64
		ok   bool
	}{
		{0x7f0000001000, "jit_alpha", 0, true},
		{0x7f00000010ff, "jit_alpha", 0xff, true},
		{0x7f0000001100, "", 0, false}, // gap
		{0x7f0000001210, "LambdaForm$MH/0x0000000800c0d000.invoke(Object)", 0x10, true},
		{0x7f000000143f, "jit gamma with spaces", 0x3f, true},
		{0x7f0000001440, "", 0, false},
		{0x1000, "", 0, false},
	} {
		name, off, ok := pm.Lookup(c.addr)
		if name != c.name || off != c.off || ok != c.ok {
			t.Errorf("Lookup(%#x) = %q, %#x, %v; want %q, %#x, %v", c.addr, name, off, ok, c.name, c.off, c.ok)
		}
	}
}

// TestPerfMapForLiveProcess: a JIT region of a running process is named by
// /tmp/perf-PID.map, found through the process's root, and reloaded when
// the JIT appends to it.
func TestPerfMapForLiveProcess(t *testing.T) {
	bin := cprog(t, true)
	pid, _ := startTarget(t, bin)
	path := fmt.Sprintf("/tmp/perf-%d.map", pid)
	if err := os.WriteFile(path, []byte("10000 100 jitted_fn\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	s := New(Options{})
	defer s.Close()
	root := fmt.Sprintf("/proc/%d/root", pid)
	pm := s.PerfMapFor(pid, root)
	if name, _, ok := pm.Lookup(0x10010); !ok || name != "jitted_fn" {
		t.Fatalf("Lookup = %q, %v", name, ok)
	}
	if err := os.WriteFile(path, []byte("10000 100 jitted_fn\n20000 10 jitted_two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Force the recheck interval to pass.
	s.perfMu.Lock()
	for _, e := range s.perfMaps {
		e.checked = e.checked.Add(-2 * perfMapRecheck)
	}
	s.perfMu.Unlock()
	pm = s.PerfMapFor(pid, root)
	if name, _, ok := pm.Lookup(0x20001); !ok || name != "jitted_two" {
		t.Fatalf("after reload: Lookup = %q, %v", name, ok)
	}
	if s.PerfMapFor(pid+1<<20, root) != nil {
		t.Error("found a perf map for a pid that has none")
	}
}

func TestKallsyms(t *testing.T) {
	text := "ffffffff81000000 T _stext\nffffffff81000100 t do_one_initcall\nffffffff81000200 D some_data\nffffffff81000300 T schedule\nffffffffc0000000 t nf_hook [nf_tables]\n"
	k, err := ParseKallsyms(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		name string
		off  uint64
	}{
		{0xffffffff81000105, "do_one_initcall", 5},
		{0xffffffff81000250, "do_one_initcall", 0x150}, // data symbols are not text
		{0xffffffff81000300, "schedule", 0},
		{0xffffffffc0000010, "nf_hook [nf_tables]", 0x10},
	} {
		name, off, ok := k.Lookup(c.addr)
		if !ok || name != c.name || off != c.off {
			t.Errorf("Lookup(%#x) = %q, %#x, %v; want %q, %#x", c.addr, name, off, ok, c.name, c.off)
		}
	}
	if _, _, ok := k.Lookup(0x1000); ok {
		t.Error("resolved an address below every symbol")
	}
	if _, err := ParseKallsyms(strings.NewReader("0000000000000000 T _stext\n0000000000000000 T schedule\n")); err == nil {
		t.Error("kptr_restrict-style all-zero kallsyms accepted")
	}
	// The real file: when readable with addresses, schedule is in it.
	if k, err := LoadKallsyms("/proc/kallsyms"); err == nil {
		if k.Len() < 1000 {
			t.Errorf("/proc/kallsyms: only %d text symbols", k.Len())
		}
		raw, err := os.ReadFile("/proc/kallsyms")
		if err != nil {
			t.Fatal(err)
		}
		// The names at schedule's address, as the file lists them.
		var addr string
		names := map[string]bool{}
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[2] == "schedule" {
				addr = f[0]
			}
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == addr && strings.ContainsAny(f[1], "tTwW") {
				names[f[2]] = true
			}
		}
		a, _ := strconv.ParseUint(addr, 16, 64)
		if name, off, ok := k.Lookup(a + 3); !ok || !names[name] || off != 3 {
			t.Errorf("/proc/kallsyms: Lookup(schedule+3 = %#x) = %q, %d, %v; want one of %v", a+3, name, off, ok, keys(names))
		}
	}
}

var gdbLineRe = regexp.MustCompile(`^Line (\d+) of "([^"]+)"`)

// gdbLines asks gdb for the line of each pc ("info line *PC").
func gdbLines(t testing.TB, file string, pcs []uint64) []a2lFrame {
	t.Helper()
	var cmds strings.Builder
	for _, pc := range pcs {
		fmt.Fprintf(&cmds, "info line *%#x\n", pc)
	}
	script := filepath.Join(t.TempDir(), "cmds.gdb")
	if err := os.WriteFile(script, []byte(cmds.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("gdb", "-nx", "-batch", "-x", script, file).Output()
	if err != nil {
		t.Fatalf("gdb: %v", err)
	}
	var r []a2lFrame
	for _, line := range strings.Split(string(out), "\n") {
		if m := gdbLineRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			r = append(r, a2lFrame{file: m[2], line: n})
		} else if strings.HasPrefix(line, "No line number information") {
			r = append(r, a2lFrame{})
		}
	}
	if len(r) != len(pcs) {
		t.Fatalf("gdb answered %d of %d pcs", len(r), len(pcs))
	}
	return r
}

// rustcMinor is the minor version of the installed rustc (1.x).
func rustcMinor(t testing.TB) int {
	out, err := exec.Command("rustc", "--version").Output()
	if err != nil {
		t.Fatalf("rustc --version: %v", err)
	}
	var minor int
	if _, err := fmt.Sscanf(string(out), "rustc 1.%d", &minor); err != nil {
		t.Fatalf("rustc --version: %q: %v", out, err)
	}
	return minor
}
