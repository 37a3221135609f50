//go:build linux

package main

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// goLevelsLines reads the "@name" markers of testdata/realworld/golevels:
// the line each frame of the main goroutine's chain reports.
func goLevelsLines(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(realSrc("golevels", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if _, m, ok := strings.Cut(sc.Text(), "// @"); ok {
			lines["main."+strings.TrimSpace(m)] = n
		}
	}
	return lines
}

// debianize copies bin, stripped as Debian ships Go programs: no symbols
// and no .gopclntab section header (Go 1.19's external linker put the
// table inside .data.rel.ro; the section is renamed here so the table is
// found only by its header, as there).
func debianize(t *testing.T, bin string) string {
	t.Helper()
	testutil.Need(t, "objcopy")
	testutil.Need(t, "strip")
	out := bin + "-deb"
	if _, err := os.Stat(out); err != nil {
		tmp := out + ".tmp"
		for _, args := range [][]string{
			{"objcopy", "--rename-section", ".gopclntab=.data.rel.ro.pcln", bin, tmp},
			{"strip", "--strip-all", tmp},
		} {
			if o, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, o)
			}
		}
		if err := os.Rename(tmp, out); err != nil {
			t.Fatal(err)
		}
	}
	ef, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	if ef.Section(".gopclntab") != nil || ef.Section(".symtab") != nil {
		t.Fatalf("%s still has .gopclntab or .symtab", out)
	}
	return out
}

// goVariant is one way of building a Go program.
type goVariant struct {
	name  string
	flags []string
	post  func(t *testing.T, bin string) string // nil: the binary as built
	env   []string                              // extra environment for go build
	needs string                                // a toolchain that must be installed
}

var goVariants = []goVariant{
	{name: "plain"},
	{name: "stripped", flags: []string{"-ldflags=-s -w"}},
	{name: "debian", flags: []string{"-trimpath", "-buildmode=pie", "-ldflags=-linkmode=external"}, post: debianize},
	{name: "static", flags: []string{"-ldflags=-s -w -linkmode=external -extldflags=-static"}},
	// Debian's own toolchain for bookworm's Go programs (pclntab of the
	// Go 1.18 format); -X keeps its builds apart in the build cache.
	{name: "go1.19-stripped", flags: []string{"-ldflags=-s -w -X main.toolchain=go1.19"}, env: go119, needs: go119Dir},
	{name: "go1.19-debian", flags: []string{"-trimpath", "-buildmode=pie", "-ldflags=-linkmode=external -X main.toolchain=go1.19"},
		post: debianize, env: go119, needs: go119Dir},
	// The next release, fetched by the go command as a toolchain module.
	{name: "go1.27-debian", flags: []string{"-trimpath", "-buildmode=pie", "-ldflags=-linkmode=external -X main.toolchain=go1.27.3"},
		post: debianize, env: []string{"GOTOOLCHAIN=go1.27.3"}},
}

// go119 is the environment that builds with Debian's golang-1.19-go (in
// GOPATH mode: this module's go.mod names a newer Go).
var go119 = []string{"PATH=" + go119Dir + ":" + os.Getenv("PATH"), "GO111MODULE=off", "GOFLAGS="}

const go119Dir = "/usr/lib/go-1.19/bin"

// buildGoVariant builds testdata/realworld/DIR as v says.
func buildGoVariant(t *testing.T, dir string, v goVariant) string {
	t.Helper()
	if v.needs != "" {
		if _, err := os.Stat(filepath.Join(v.needs, "go")); err != nil {
			testutil.Skip(t, v.needs+" (Debian's golang-1.19-go) is not installed on this machine")
		}
	}
	for _, e := range v.env {
		k, val, _ := strings.Cut(e, "=")
		t.Setenv(k, val)
	}
	bin := buildGoTarget(t, dir, v.flags...)
	if v.post != nil {
		bin = v.post(t, bin)
	}
	return bin
}

// checkGoThreads asserts that every thread of a Go process ends at one of
// the runtime's stack roots without error, and that every frame in the
// program's own module is named, has file and line, and was found by
// exact means (no stack scanning). A thread that was running when a
// nostop capture passed shows no stack, by contract.
func checkGoThreads(t *testing.T, p jProc, exe string) {
	t.Helper()
	base := filepath.Base(exe)
	for _, th := range p.Threads {
		if th.Error != nil && strings.Contains(*th.Error, "not stopped in nostop mode") {
			continue // only what /proc showed (at most the PC it last left a call at)
		}
		f := fnames(th)
		last := ""
		if len(f) > 0 {
			last = f[len(f)-1]
		}
		// A nostop capture may find a thread running while its stack was
		// copied (sysmon wakes every few ms): it says so, by contract.
		torn := th.Error != nil && strings.Contains(*th.Error, "may be torn")
		if !goRoots[last] || th.Error != nil && !torn {
			e := "<nil>"
			if th.Error != nil {
				e = *th.Error
			}
			t.Errorf("thread %d: ends in %q (error %s): %v", th.TID, last, e, f)
		}
		for i, fr := range th.Frames {
			if fr.Kind != "user" || filepath.Base(fr.Module) != base {
				continue
			}
			if fr.Function == nil || fr.File == "" || fr.Line <= 0 {
				t.Errorf("thread %d frame %d (%s+%s): function %q file %q line %d", th.TID, i, fr.Module, fr.ModuleOffset, fr.Fn(), fr.File, fr.Line)
			}
			if fr.Method == "scan" || fr.Method == "fp-heuristic" {
				t.Errorf("thread %d frame %d %s: found by %s", th.TID, i, fr.Fn(), fr.Method)
			}
		}
	}
}

// TestGoNames: a Go program built plain, stripped, as Debian builds it
// (PIE, external linking, stripped, no .gopclntab header) and static:
// the main goroutine's thread shows main.level3 < level2 < level1 <
// main.main < runtime.main < runtime.goexit with the source's lines, and
// every thread is rooted through exact frames.
func TestGoNames(t *testing.T) {
	want := []string{"main.level3", "main.level2", "main.level1", "main.main", "runtime.main", "runtime.goexit"}
	lines := goLevelsLines(t)
	for _, v := range goVariants {
		t.Run(v.name, func(t *testing.T) {
			bin := buildGoVariant(t, "golevels", v)
			tg := testutil.Start(t, bin)
			for _, mode := range []string{"nostop", "stop"} {
				p := dumpJSON(t, "--mode", mode, strconv.Itoa(tg.PID))
				m := mustThreadWith(t, p, "main.level3")
				f := fnames(m)
				if !hasChain(f, want) || f[len(f)-1] != "runtime.goexit" {
					t.Errorf("%s: main goroutine: want %v ending the stack, got %v", mode, want, f)
				}
				for _, fr := range m.Frames {
					if fr.Inlined || lines[fr.Fn()] == 0 {
						continue
					}
					if !strings.HasSuffix(fr.File, "main.go") || fr.Line != lines[fr.Fn()] {
						t.Errorf("%s: %s at %s:%d, want main.go:%d", mode, fr.Fn(), fr.File, fr.Line, lines[fr.Fn()])
					}
				}
				checkGoThreads(t, p, bin)
			}
			assertUntouched(t, tg.PID, false)
		})
	}
}

// TestRealAge: Debian's age (PIE, externally linked, stripped, its pclntab
// inside .data.rel.ro, Go 1.19) encrypting a stdin that never ends: the
// main goroutine's thread shows main.main < runtime.main <
// runtime.goexit, every frame of age is named with file and line, and
// every thread is rooted through exact frames.
func TestRealAge(t *testing.T) {
	age := testutil.Need(t, "age")
	keygen := testutil.Need(t, "age-keygen")
	out, err := exec.Command(keygen).CombinedOutput()
	if err != nil {
		t.Fatalf("age-keygen: %v\n%s", err, out)
	}
	var recipient string
	for _, l := range strings.Split(string(out), "\n") {
		if _, r, ok := strings.Cut(l, "public key: "); ok {
			recipient = strings.TrimSpace(r)
		}
	}
	if !strings.HasPrefix(recipient, "age1") {
		t.Fatalf("no public key in age-keygen's output:\n%s", out)
	}
	cmd := exec.Command(age, "-e", "-r", recipient)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Kill()
		stdin.Close()
		cmd.Wait()
	})
	// age reads its input in the main goroutine, on whichever thread
	// runs it: wait until one of them blocks in read.
	reading := func() bool {
		for tid := range testutil.ThreadStates(pid) {
			if testutil.WaitInSyscallNr(pid, tid, 0, 0) {
				return true
			}
		}
		return false
	}
	for end := time.Now().Add(10 * time.Second); !reading(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("age (pid %d) did not block reading its input", pid)
		}
	}
	for _, mode := range []string{"nostop", "stop"} {
		p := dumpJSON(t, "--mode", mode, strconv.Itoa(pid))
		m := mustThreadWith(t, p, "main.main")
		if f := fnames(m); !hasChain(f, []string{"main.main", "runtime.main", "runtime.goexit"}) || f[len(f)-1] != "runtime.goexit" {
			t.Errorf("%s: age's main goroutine: want main.main < runtime.main < runtime.goexit ending the stack in %v", mode, f)
		}
		checkGoThreads(t, p, age)
	}
	assertUntouched(t, pid, false)
}

// TestGoNamesCgo: a Go program blocked in C called through cgo, built
// the Debian way (stripped: the C functions lose their names): from the C
// frames, asmcgocall's stack switch leads back to the goroutine's exact
// frames, runtime.cgocall < main._Cfunc_c_read1 < main.goReadB <
// main.goReadA < main.main < runtime.main < runtime.goexit.
func TestGoNamesCgo(t *testing.T) {
	testutil.Need(t, "gcc")
	bin := buildGoVariant(t, "cgotarget", goVariants[2])
	tg := testutil.Start(t, bin)
	want := []string{"runtime.asmcgocall", "runtime.cgocall", "main._Cfunc_c_read1", "main.goReadB", "main.goReadA", "main.main", "runtime.main", "runtime.goexit"}
	for _, mode := range []string{"nostop", "stop"} {
		p := dumpJSON(t, "--mode", mode, strconv.Itoa(tg.PID))
		m := mustThreadWith(t, p, "main.goReadB")
		if f := fnames(m); !hasChain(f, want) || f[len(f)-1] != "runtime.goexit" || m.Error != nil {
			t.Errorf("%s: cgo thread: want %v ending the stack without error, got %v (error %v)", mode, want, f, m.Error)
		}
	}
	assertUntouched(t, tg.PID, false)
}
