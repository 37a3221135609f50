package symtab

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// Build commands of the C/C++ targets (recorded here, run at test time).
func cxxNoDebug(t testing.TB) string {
	skipWithout(t, "g++", "nm")
	return artifact(t, "cxxprog-nodebug", []string{"g++", "-O2", "-g0", "-o", "$OUT", "$SRC/cxxprog.cc"})
}

func shlib(t testing.TB) string {
	skipWithout(t, "gcc", "nm")
	return artifact(t, "libshlib.so", []string{"gcc", "-O2", "-g", "-fPIC", "-shared", "-Wl,--build-id", "-o", "$OUT", "$SRC/shlib.c"})
}

func cprog(t testing.TB, pie bool) string {
	lib := shlib(t)
	name, flag, cflag := "cprog-nopie", "-no-pie", "-fno-pie"
	if pie {
		name, flag, cflag = "cprog-pie", "-pie", "-fPIE"
	}
	return artifact(t, name, []string{"gcc", "-O2", "-g", flag, cflag, "-Wl,--build-id", "-o", "$OUT", "$SRC/cprog.c",
		"-L" + filepath.Dir(lib), "-lshlib", "-Wl,-rpath," + filepath.Dir(lib)})
}

// isFuncType reports whether an nm type letter is a text symbol.
func isFuncType(c byte) bool { return c == 'T' || c == 't' || c == 'W' || c == 'w' || c == 'i' }

// TestSymtabMatchesNM resolves, through .symtab alone, the first and last
// byte of every sized function nm lists, and the bytes just after it
// (padding between functions must not take a name).
func TestSymtabMatchesNM(t *testing.T) {
	bin := cxxNoDebug(t)
	for _, demangle := range []bool{true, false} {
		t.Run(fmt.Sprintf("demangle=%v", demangle), func(t *testing.T) {
			s := New(Options{NoDemangle: !demangle})
			defer s.Close()
			m := openFileModule(t, s, bin)
			nm := runNM(t, bin, demangle)
			starts := map[uint64]bool{}
			for _, sym := range nm {
				starts[sym.addr] = true
			}
			checked := 0
			for _, sym := range nm {
				if !isFuncType(sym.typ) || !sym.hasSize || sym.size == 0 {
					continue
				}
				names := aliases(nm, sym.addr)
				for _, pc := range []uint64{sym.addr, sym.addr + sym.size/2, sym.addr + sym.size - 1} {
					got := m.Lookup(pc, nil)
					if len(got) != 1 || !names[got[0].Function] {
						t.Errorf("Lookup(%#x) = %+v, want one of %v", pc, got, keys(names))
						continue
					}
					if got[0].Offset != pc-sym.addr {
						t.Errorf("Lookup(%#x).Offset = %#x, want %#x", pc, got[0].Offset, pc-sym.addr)
					}
					checked++
				}
				end := sym.addr + sym.size
				if !starts[end] && !insideAny(nm, end) {
					if got := m.Lookup(end, nil); len(got) != 0 {
						t.Errorf("Lookup(%#x) (padding after %s) = %+v, want nothing", end, sym.name, got)
					}
				}
			}
			if checked < 15 {
				t.Fatalf("only %d addresses checked: nm output not as expected", checked)
			}
			// The names the test program defines are there, demangled or not.
			want := "outer::inner::calls_inline(int)"
			if !demangle {
				want = "_ZN5outer5inner12calls_inlineEi"
			}
			sym := nmFind(t, nm, want)
			if got := lookupName(m, sym.addr+1); got != want {
				t.Errorf("calls_inline: got %q, want %q", got, want)
			}
		})
	}
}

func aliases(nm []nmSym, addr uint64) map[string]bool {
	r := map[string]bool{}
	for _, s := range nm {
		if s.addr == addr && isFuncType(s.typ) {
			r[s.name] = true
		}
	}
	return r
}

func insideAny(nm []nmSym, pc uint64) bool {
	for _, s := range nm {
		if isFuncType(s.typ) && s.hasSize && pc >= s.addr && pc < s.addr+s.size {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var r []string
	for k := range m {
		r = append(r, k)
	}
	return r
}

// TestDynsymOnly: a fully stripped shared object keeps .dynsym; exported
// functions resolve, the static one (absent from .dynsym) must not take a
// neighbour's name.
func TestDynsymOnly(t *testing.T) {
	skipWithout(t, "strip")
	lib := shlib(t)
	stripped := artifact(t, "libshlib-stripped.so", []string{"strip", "--strip-all", "-o", "$OUT", lib})
	nm := runNM(t, lib, false) // the unstripped library says where things are
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, stripped)
	if src := m.SymbolSources(); len(src) != 1 || src[0] != "dynsym" {
		t.Errorf("sources = %v, want [dynsym]", src)
	}
	for _, name := range []string{"lib_work", "lib_local_addr"} {
		sym := nmFind(t, nm, name)
		if got := lookupName(m, sym.addr); got != name {
			t.Errorf("%s at %#x: got %q", name, sym.addr, got)
		}
	}
	local := nmFind(t, nm, "lib_local")
	if got := m.Lookup(local.addr, nil); len(got) != 0 {
		t.Errorf("static lib_local at %#x resolved through .dynsym to %+v, want nothing", local.addr, got)
	}
}

func TestBuildIDOfFile(t *testing.T) {
	bin := cxxNoDebug(t)
	want := readelfBuildID(t, bin)
	if want == "" {
		t.Fatal("readelf shows no build id: the toolchain did not add one")
	}
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, bin)
	if m.BuildID() != want {
		t.Errorf("BuildID = %q, want %q (readelf)", m.BuildID(), want)
	}
	// Cached by build id: a second ref with that id returns the same module.
	m2, err := s.Module(ModuleRef{Path: "/nonexistent", BuildID: want})
	if err != nil || m2 != m {
		t.Errorf("Module by build id = %p, %v; want cached %p", m2, err, m)
	}
	// Another build id in memory than in the file: a mismatch that
	// resolves nothing.
	mm, err := s.Module(ModuleRef{Path: bin, BuildID: strings.Repeat("ab", 20)})
	if err != nil {
		t.Fatal(err)
	}
	if !mm.Mismatch() {
		t.Fatal("Mismatch() = false for another build id")
	}
	nm := runNM(t, bin, true)
	if got := mm.Lookup(nmFind(t, nm, "main").addr, nil); len(got) != 0 {
		t.Errorf("mismatched module resolved main to %+v", got)
	}
	if mm.ELF() != nil {
		t.Error("mismatched module offers its ELF for unwinding")
	}
}

// TestFileOffsetToVaddrTable checks the translation through PT_LOAD
// segments laid out as the three ELF kinds lay them out (values as
// `readelf -lW` shows them for gcc 12 / binutils 2.40 outputs).
func TestFileOffsetToVaddrTable(t *testing.T) {
	type tc struct {
		off, vaddr uint64
		ok         bool
	}
	tables := []struct {
		kind  string
		loads []loadSeg
		cases []tc
	}{
		{"non-PIE executable", []loadSeg{
			{off: 0, filesz: 0x5e0, vaddr: 0x400000, memsz: 0x5e0},
			{off: 0x1000, filesz: 0x1d5, vaddr: 0x401000, memsz: 0x1d5},
			{off: 0x2000, filesz: 0x104, vaddr: 0x402000, memsz: 0x104},
			{off: 0x2df8, filesz: 0x240, vaddr: 0x403df8, memsz: 0x248},
		}, []tc{
			{0x1000, 0x401000, true}, {0x1136, 0x401136, true}, {0x11d4, 0x4011d4, true},
			{0x2050, 0x402050, true}, {0x2e00, 0x403e00, true},
			{0x2c00, 0x403c00, true}, // page slack before .data's segment, same mmap
			{0x4000, 0, false},
		}},
		{"PIE executable", []loadSeg{
			{off: 0, filesz: 0x628, vaddr: 0, memsz: 0x628},
			{off: 0x1000, filesz: 0x1a1, vaddr: 0x1000, memsz: 0x1a1},
			{off: 0x2000, filesz: 0xf4, vaddr: 0x2000, memsz: 0xf4},
			{off: 0x2de8, filesz: 0x258, vaddr: 0x3de8, memsz: 0x260},
		}, []tc{
			{0x1139, 0x1139, true}, {0x0, 0x0, true}, {0x2e00, 0x3e00, true}, {0x3100, 0, false},
		}},
		{"shared object, prelinked-style gaps", []loadSeg{
			{off: 0, filesz: 0x3000, vaddr: 0x7000, memsz: 0x3000},
			{off: 0x3000, filesz: 0x10000, vaddr: 0x20000, memsz: 0x10000},
		}, []tc{
			{0x10, 0x7010, true}, {0x3000, 0x20000, true}, {0x12fff, 0x2ffff, true}, {0x13000, 0, false},
		}},
	}
	for _, tb := range tables {
		for _, c := range tb.cases {
			v, ok := offsetToVaddr(tb.loads, c.off)
			if ok != c.ok || (ok && v != c.vaddr) {
				t.Errorf("%s: offsetToVaddr(%#x) = %#x, %v; want %#x, %v", tb.kind, c.off, v, ok, c.vaddr, c.ok)
			}
		}
	}
}

// TestMappingBias: segments sharing a file page (the RW segment starts in
// the last page of the R segment, binutils' default layout): the mapping
// at offset 0x2000 is the RW one when its length says so.
func TestMappingBias(t *testing.T) {
	loads := []loadSeg{
		{off: 0, filesz: 0x5e0, vaddr: 0x400000, memsz: 0x5e0},
		{off: 0x1000, filesz: 0x1d5, vaddr: 0x401000, memsz: 0x1d5},
		{off: 0x2000, filesz: 0x104, vaddr: 0x402000, memsz: 0x104},
		{off: 0x2df8, filesz: 0x240, vaddr: 0x403df8, memsz: 0x248},
	}
	for _, c := range []struct {
		start, end, off, bias uint64
	}{
		{0x400000, 0x401000, 0, 0},                               // non-PIE: no bias
		{0x7f0000001000, 0x7f0000002000, 0x1000, 0x7effffc00000}, // text
		{0x7f0000002000, 0x7f0000003000, 0x2000, 0x7effffc00000}, // rodata
		{0x7f0000003000, 0x7f0000005000, 0x2000, 0x7effffc00000}, // data: same offset page, its own length
	} {
		b, ok := mappingBias(loads, c.start, c.end, c.off)
		if !ok || b != c.bias {
			t.Errorf("mappingBias(%#x-%#x @%#x) = %#x, %v; want %#x", c.start, c.end, c.off, b, ok, c.bias)
		}
	}
	// Where the difference shows: data mapped at 0x7f0000013000 (a gap
	// after rodata, as with -z separate-code and large alignment).
	b, _ := mappingBias(loads, 0x7f0000013000, 0x7f0000015000, 0x2000)
	if v := uint64(0x7f0000013e00) - b; v != 0x403e00 {
		t.Errorf("data pc maps to %#x, want 0x403e00", v)
	}
}

// procMapping is one line of /proc/PID/maps, parsed here independently of
// the procmaps package.
type procMapping struct {
	start, end, off uint64
	major, minor    uint32
	ino             uint64
	path            string
}

func readProcMaps(t testing.TB, pid int) []procMapping {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r []procMapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		var m procMapping
		a, b, _ := strings.Cut(fs[0], "-")
		m.start, _ = strconv.ParseUint(a, 16, 64)
		m.end, _ = strconv.ParseUint(b, 16, 64)
		m.off, _ = strconv.ParseUint(fs[2], 16, 64)
		ma, mi, _ := strings.Cut(fs[3], ":")
		x, _ := strconv.ParseUint(ma, 16, 32)
		y, _ := strconv.ParseUint(mi, 16, 32)
		m.major, m.minor = uint32(x), uint32(y)
		m.ino, _ = strconv.ParseUint(fs[4], 10, 64)
		if len(fs) > 5 {
			m.path = strings.Join(fs[5:], " ")
		}
		r = append(r, m)
	}
	return r
}

func mappingOf(t testing.TB, maps []procMapping, pc uint64) procMapping {
	t.Helper()
	for _, m := range maps {
		if pc >= m.start && pc < m.end {
			return m
		}
	}
	t.Fatalf("no mapping contains %#x", pc)
	return procMapping{}
}

// mkdev encodes a device number as glibc's makedev does (and as
// unix.Mkdev does).
func mkdev(major, minor uint32) uint64 {
	return uint64(major&0xfff)<<8 | uint64(minor&0xff) | uint64(major&^0xfff)<<32 | uint64(minor&^0xff)<<12
}

// refFor builds the ModuleRef a caller would build for mapping mp of pid.
func refFor(pid int, mp procMapping, buildID string) ModuleRef {
	return ModuleRef{
		Path:     strings.TrimSuffix(mp.path, " (deleted)"),
		MapFiles: fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, mp.start, mp.end),
		Root:     fmt.Sprintf("/proc/%d/root", pid),
		Dev:      mkdev(mp.major, mp.minor),
		Inode:    mp.ino,
		BuildID:  buildID,
	}
}

// startTarget starts a test target that prints one line once it is ready,
// returns its pid and that line, and kills it (by pid) when the test ends.
func startTarget(t testing.TB, argv ...string) (int, string) {
	t.Helper()
	testutil.NeedLive(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("%v printed no line: %v", argv, err)
	}
	return cmd.Process.Pid, strings.TrimSpace(line)
}

// procMem reads a process's memory through /proc/PID/mem.
func procMem(t testing.TB, pid int) *os.File {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestLiveOffsetsAndBuildIDs runs a PIE and a non-PIE program linked
// against a shared object. Each prints the runtime address of a static
// function of its own and of the library; the test maps those addresses
// back, as the caller of this package does (off = pc - start + offset,
// then FileOffsetToVaddr), and expects nm's addresses and names; build ids
// read from the process's memory must equal readelf's.
func TestLiveOffsetsAndBuildIDs(t *testing.T) {
	for _, pie := range []bool{false, true} {
		t.Run(fmt.Sprintf("pie=%v", pie), func(t *testing.T) {
			bin := cprog(t, pie)
			lib := shlib(t)
			pid, line := startTarget(t, bin)
			var progPC, libPC uint64
			if _, err := fmt.Sscanf(line, "0x%x 0x%x", &progPC, &libPC); err != nil {
				t.Fatalf("target printed %q: %v", line, err)
			}
			maps := readProcMaps(t, pid)
			mem := procMem(t, pid)
			s := New(Options{})
			defer s.Close()
			for _, c := range []struct {
				pc   uint64
				file string
				name string
			}{{progPC, bin, "prog_local"}, {libPC, lib, "lib_local"}} {
				mp := mappingOf(t, maps, c.pc)
				if mp.path != c.file {
					t.Fatalf("%#x is mapped from %q, want %q", c.pc, mp.path, c.file)
				}
				// The image's base: the mapping of file offset 0.
				var base uint64
				for _, x := range maps {
					if x.path == mp.path && x.off == 0 {
						base = x.start
						break
					}
				}
				id, err := BuildIDFromMemory(mem, base)
				if want := readelfBuildID(t, c.file); err != nil || id != want {
					t.Errorf("BuildIDFromMemory(%s at %#x) = %q, %v; want %q", c.file, base, id, err, want)
				}
				m, err := s.Module(refFor(pid, mp, id))
				if err != nil {
					t.Fatal(err)
				}
				if m.Mismatch() {
					t.Fatalf("%s: unexpected mismatch", c.file)
				}
				vaddr, ok := m.FileOffsetToVaddr(c.pc - mp.start + mp.off)
				want := nmFind(t, runNM(t, c.file, false), c.name).addr
				if !ok || vaddr != want {
					t.Errorf("%s: FileOffsetToVaddr = %#x, %v; want %#x (nm)", c.name, vaddr, ok, want)
				}
				if bias, ok := m.MappingBias(mp.start, mp.end, mp.off); !ok || c.pc-bias != want {
					t.Errorf("%s: MappingBias = %#x, %v: pc-bias = %#x, want %#x (nm)", c.name, bias, ok, c.pc-bias, want)
				}
				if got := lookupName(m, vaddr); got != c.name {
					t.Errorf("Lookup(%#x) = %q, want %q", vaddr, got, c.name)
				}
			}
		})
	}
}

func TestDemangleMatchesNM(t *testing.T) {
	bin := cxxNoDebug(t)
	raw := runNM(t, bin, false)
	dem := runNM(t, bin, true)
	if len(raw) != len(dem) {
		t.Fatalf("nm and nm -C list %d and %d symbols", len(raw), len(dem))
	}
	n := 0
	for i := range raw {
		if !strings.HasPrefix(raw[i].name, "_Z") {
			continue
		}
		n++
		if got := Demangle(raw[i].name); got != dem[i].name {
			t.Errorf("Demangle(%q) = %q, nm -C says %q", raw[i].name, got, dem[i].name)
		}
	}
	if n < 4 {
		t.Fatalf("only %d mangled names", n)
	}
	for _, plain := range []string{"main", "_start", "", "_Z", "runtime.main", "_ZN"} {
		if got := Demangle(plain); got != plain {
			t.Errorf("Demangle(%q) = %q, want it unchanged", plain, got)
		}
	}
}
