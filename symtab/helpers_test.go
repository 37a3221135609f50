package symtab

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"stackshot/internal/testutil"
	"strconv"
	"strings"
	"testing"
)

// srcDir is where the test targets' sources live.
func srcDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.Abs("../testdata/symtab")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// skipWithout skips the test (fails it under STACKSHOT_STRICT=1) when the
// machine lacks a tool it needs; see testutil.Need.
func skipWithout(t testing.TB, tools ...string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		testutil.Skip(t, "needs linux (ELF binaries built by the system toolchain), have "+runtime.GOOS)
	}
	for _, tool := range tools {
		testutil.Need(t, tool)
	}
}

// artifact builds a target from testdata/symtab (see testutil.Artifact).
func artifact(t testing.TB, name string, steps ...[]string) string {
	t.Helper()
	return testutil.Artifact(t, name, testutil.Testdata("symtab"), steps...)
}

func sh(cmd string) []string { return []string{"sh", "-c", cmd} }

// nmSym is one line of `nm --defined-only -S`.
type nmSym struct {
	addr, size uint64
	hasSize    bool
	typ        byte
	name       string
}

// runNM lists the defined symbols of file (demangled with -C when
// demangle is set), as nm prints them.
func runNM(t testing.TB, file string, demangle bool, extra ...string) []nmSym {
	t.Helper()
	args := []string{"--defined-only", "-S"}
	if demangle {
		args = append(args, "-C")
	}
	args = append(args, extra...)
	args = append(args, file)
	o, err := exec.Command("nm", args...).Output()
	if err != nil {
		t.Fatalf("nm %s: %v", file, err)
	}
	var syms []nmSym
	sc := bufio.NewScanner(bytes.NewReader(o))
	for sc.Scan() {
		line := sc.Text()
		f := strings.SplitN(line, " ", 4)
		var s nmSym
		var err error
		if s.addr, err = strconv.ParseUint(f[0], 16, 64); err != nil || len(f) < 3 {
			continue
		}
		if len(f[1]) == 1 {
			s.typ = f[1][0]
			s.name = strings.Join(f[2:], " ")
		} else {
			s.size, _ = strconv.ParseUint(f[1], 16, 64)
			s.hasSize = true
			s.typ = f[2][0]
			s.name = f[3]
		}
		syms = append(syms, s)
	}
	return syms
}

// nmFind returns the symbol named name.
func nmFind(t testing.TB, syms []nmSym, name string) nmSym {
	t.Helper()
	for _, s := range syms {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("nm lists no %q", name)
	return nmSym{}
}

// readelfBuildID returns the build id readelf -n prints for file.
func readelfBuildID(t testing.TB, file string) string {
	t.Helper()
	o, err := exec.Command("readelf", "-n", file).Output()
	if err != nil {
		t.Fatalf("readelf -n %s: %v", file, err)
	}
	for _, line := range strings.Split(string(o), "\n") {
		if _, id, ok := strings.Cut(line, "Build ID:"); ok {
			return strings.TrimSpace(id)
		}
	}
	return ""
}

// openFileModule opens a module by path alone (no process).
func openFileModule(t testing.TB, s *Symbolizer, path string) *Module {
	t.Helper()
	m, err := s.Module(ModuleRef{Path: path})
	if err != nil {
		t.Fatalf("Module(%s): %v", path, err)
	}
	return m
}

// lookupName returns the outermost (physical) function name at pc.
func lookupName(m *Module, pc uint64) string {
	syms := m.Lookup(pc, nil)
	if len(syms) == 0 {
		return ""
	}
	return syms[len(syms)-1].Function
}
