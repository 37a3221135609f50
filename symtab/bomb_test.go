package symtab

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"stackshot/internal/testutil"
)

// Files that claim gigabytes once decompressed must cost a symbolizing
// process little memory: each test runs the symbolizer in a child process
// (this test binary, re-executed) and reads the child's peak RSS (VmHWM).
// The child also runs under a 4 GiB address-space limit, so a build that
// does decompress the bomb fails there instead of taking the machine's
// memory.

const (
	bombChildEnv   = "STACKSHOT_BOMB_CHILD"
	bombMapEnv     = "STACKSHOT_BOMB_MAPFILES"
	bombMaxRSSKB   = 512 << 10
	bombChildLimit = 4 << 30
)

func init() {
	if p := os.Getenv(bombChildEnv); p != "" {
		os.Exit(bombChild(p, os.Getenv(bombMapEnv)))
	}
}

// bombChild symbolizes bomb_func in the file at path (through mapFiles
// when given, as for a live target) and prints what it found and its peak
// RSS. It uses only the oldest API, so it measures older builds too.
func bombChild(path, mapFiles string) int {
	lim := syscall.Rlimit{Cur: bombChildLimit, Max: bombChildLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return 3
	}
	s := New(Options{})
	name, errText := "", ""
	m, err := s.Module(ModuleRef{Path: path, MapFiles: mapFiles})
	if err != nil {
		errText = err.Error()
	} else if syms := m.Lookup(testutil.BombFuncAddr+0x10, nil); len(syms) > 0 {
		name = syms[0].Function
	}
	fmt.Printf("name=%q\nerr=%q\nhwm_kb=%d\n", name, errText, vmHWM())
	return 0
}

// vmHWM is this process's peak resident set in KiB.
func vmHWM() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return -1
}

type bombResult struct {
	name, err string
	hwmKB     int
}

// runBombChild runs bombChild in a child process.
func runBombChild(t *testing.T, path, mapFiles string) bombResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), bombChildEnv+"="+path, bombMapEnv+"="+mapFiles)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("symbolizing child failed (%v): the bomb was decompressed past the child's %d GiB limit?\n%s",
			err, bombChildLimit>>30, tail(out))
	}
	var r bombResult
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "name":
			r.name, _ = strconv.Unquote(v)
		case "err":
			r.err, _ = strconv.Unquote(v)
		case "hwm_kb":
			r.hwmKB, _ = strconv.Atoi(v)
		}
	}
	if r.hwmKB <= 0 {
		t.Fatalf("child printed no peak RSS:\n%s", out)
	}
	t.Logf("child: name=%q err=%q peak RSS %d MiB", r.name, r.err, r.hwmKB>>10)
	return r
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func writeBomb(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mappedBy starts a real process that maps file and returns the
// map_files path of its mapping.
func mappedBy(t *testing.T, file string) string {
	t.Helper()
	skipWithout(t, "gcc")
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("symtab", "mapfile.c")}, "-O2")
	tg := testutil.Start(t, bin, file)
	for _, m := range readProcMaps(t, tg.PID) {
		if m.path == file {
			return fmt.Sprintf("/proc/%d/map_files/%x-%x", tg.PID, m.start, m.end)
		}
	}
	t.Fatalf("%s is not mapped by pid %d", file, tg.PID)
	return ""
}

// TestShstrtabBomb: a 100 KB ELF whose section-name table is zstd
// compressed and claims 3 GiB, mapped by a real target. debug/elf would
// decompress it while merely opening the file (12 GB RSS measured); the
// module must be refused as malformed, cheaply.
func TestShstrtabBomb(t *testing.T) {
	b := testutil.ShstrtabBomb()
	if len(b) > 200<<10 {
		t.Fatalf("bomb is %d bytes, want a small file", len(b))
	}
	file := writeBomb(t, "shstrtab.bomb", b)
	r := runBombChild(t, file, mappedBy(t, file))
	if r.hwmKB > bombMaxRSSKB {
		t.Errorf("peak RSS %d MiB, want under %d MiB", r.hwmKB>>10, bombMaxRSSKB>>10)
	}
	if r.name != "" || !strings.Contains(r.err, "compressed section-name table") {
		t.Errorf("module: name %q, err %q; want it refused for its compressed section-name table", r.name, r.err)
	}
}

// TestDebugSectionBombs: .debug_* sections (zstd and zlib) claiming and
// holding 1 GiB each, one and four of them (which were decompressed in
// parallel). The DWARF is given up; the module's symbol table still names
// bomb_func; memory stays small.
func TestDebugSectionBombs(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d sections", n), func(t *testing.T) {
			file := writeBomb(t, "debug.bomb", testutil.DebugBomb(n))
			r := runBombChild(t, file, mappedBy(t, file))
			if r.hwmKB > bombMaxRSSKB {
				t.Errorf("peak RSS %d MiB, want under %d MiB", r.hwmKB>>10, bombMaxRSSKB>>10)
			}
			if r.name != "bomb_func" {
				t.Errorf("name %q (err %q), want bomb_func from .symtab", r.name, r.err)
			}
		})
	}
}
