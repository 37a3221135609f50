package symtab

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// referenceSyms collects what collectSyms must collect, through debug/elf's
// own symbol reader (an independent parser): the function symbols, their
// names trimmed as collectSyms trims them.
func referenceSyms(t *testing.T, ef *elf.File, dynamic bool) []rawSym {
	t.Helper()
	var syms []elf.Symbol
	var err error
	if dynamic {
		syms, err = ef.DynamicSymbols()
	} else {
		syms, err = ef.Symbols()
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []rawSym
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if s.Name == "" || s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE || int(s.Section) >= len(ef.Sections) {
			continue
		}
		sec := ef.Sections[s.Section]
		if typ == elf.STT_NOTYPE && (sec.Flags&elf.SHF_EXECINSTR == 0 || s.Name[0] == '$' || strings.HasPrefix(s.Name, ".L")) ||
			typ != elf.STT_NOTYPE && typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC || sec.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		name := s.Name
		if i := strings.IndexByte(name, '@'); !dynamic && i > 0 {
			name = name[:i]
		}
		out = append(out, rawSym{addr: s.Value, size: s.Size, secEnd: sec.Addr + sec.Size, name: strings.TrimSuffix(name, ".abi0")})
	}
	return out
}

// TestCollectSymsMatchesDebugElf: the symbol table reader (which reads the
// table itself, for speed) collects the same symbols, in the same order,
// as debug/elf's reader does, from 64-bit files (libc's .dynsym and its
// debug file's .symtab, a C++ program) and a 32-bit object.
func TestCollectSymsMatchesDebugElf(t *testing.T) {
	skipWithout(t, "gcc", "g++")
	dir := t.TempDir()
	var files []string
	cxx := filepath.Join(dir, "cxx")
	if out, err := exec.Command("g++", "-O1", "-g", "-o", cxx, filepath.Join("..", "testdata", "symtab", "cxxprog.cc")).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	files = append(files, cxx)
	obj32 := filepath.Join(dir, "f32.o")
	if err := os.WriteFile(filepath.Join(dir, "f32.c"), []byte("int f(void){return 1;}\nstatic int g(void){return 2;}\nint h(void){return f()+g();}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-m32", "-c", "-o", obj32, filepath.Join(dir, "f32.c")).CombinedOutput(); err == nil {
		files = append(files, obj32)
	} else {
		t.Logf("no 32-bit object (gcc -m32 -c: %s): the ELF32 reader is not compared", bytes.TrimSpace(out))
	}
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err == nil {
		files = append(files, libc)
		if id := readelfBuildID(t, libc); id != "" {
			if dbg := "/usr/lib/debug/.build-id/" + id[:2] + "/" + id[2:] + ".debug"; func() bool { _, err := os.Stat(dbg); return err == nil }() {
				files = append(files, dbg)
			}
		}
	}
	total := 0
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ef, err := elf.NewFile(f)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		of := &openFile{name: path, r: f, size: st.Size(), ef: ef}
		for _, dynamic := range []bool{false, true} {
			typ := elf.SHT_SYMTAB
			if dynamic {
				typ = elf.SHT_DYNSYM
			}
			if !slices.ContainsFunc(ef.Sections, func(s *elf.Section) bool { return s.Type == typ }) {
				continue
			}
			got, err := collectSyms(of, dynamic, 0, nil)
			if err != nil {
				t.Fatalf("%s dynamic=%v: %v", path, dynamic, err)
			}
			want := referenceSyms(t, ef, dynamic)
			if len(got) != len(want) {
				t.Errorf("%s dynamic=%v: %d symbols, debug/elf gives %d", path, dynamic, len(got), len(want))
				continue
			}
			for i := range got {
				g, w := got[i], want[i]
				if g.addr != w.addr || g.size != w.size || g.secEnd != w.secEnd || g.name != w.name {
					t.Errorf("%s dynamic=%v symbol %d: %+v, debug/elf gives %+v", path, dynamic, i, g, w)
					break
				}
			}
			t.Logf("%s dynamic=%v: %d function symbols agree", path, dynamic, len(got))
			total += len(got)
		}
	}
	if total == 0 {
		t.Fatal("no symbols compared")
	}
}
