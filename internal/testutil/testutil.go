// Package testutil builds test targets from testdata/ at test time, starts
// them, and stops them (by pid, never by name).
package testutil

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Root returns the repository root (the directory holding go.mod).
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Testdata returns a path under the repository's testdata/.
func Testdata(elem ...string) string {
	return filepath.Join(append([]string{Root(), "testdata"}, elem...)...)
}

var buildMu sync.Mutex

// CacheDir is where built targets are kept between test runs
// (testdata/build, ignored by git), keyed by the hash of sources and flags.
func CacheDir() string { return Testdata("build") }

// Build compiles sources with compiler (gcc, g++, ...) and flags, once per
// distinct input, and returns the binary's path. The exact command is
// recorded next to the binary in NAME.cmd.
func Build(t testing.TB, compiler string, srcs []string, flags ...string) string {
	t.Helper()
	bin, err := BuildErr(compiler, srcs, flags...)
	if err != nil {
		t.Fatalf("building %v: %v", srcs, err)
	}
	return bin
}

// BuildErr is Build without a testing.TB.
func BuildErr(compiler string, srcs []string, flags ...string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	h := sha256.New()
	fmt.Fprintln(h, compiler, strings.Join(flags, " "))
	for _, s := range srcs {
		b, err := os.ReadFile(s)
		if err != nil {
			return "", err
		}
		fmt.Fprintln(h, filepath.Base(s))
		h.Write(b)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	name := strings.TrimSuffix(filepath.Base(srcs[0]), filepath.Ext(srcs[0])) + "-" + sum
	dir := CacheDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := bin + ".tmp"
	args := append(append([]string{}, srcs...), flags...)
	args = append(args, "-o", tmp)
	cmd := exec.Command(compiler, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", compiler, strings.Join(args, " "), err, out)
	}
	os.WriteFile(bin+".cmd", []byte(compiler+" "+strings.Join(args, " ")+"\n"), 0o644)
	return bin, os.Rename(tmp, bin)
}

// Target is a running test target.
type Target struct {
	Cmd   *exec.Cmd
	PID   int
	stdin io.WriteCloser
	out   *bufio.Reader
	t     testing.TB
	mu    sync.Mutex
}

// Start runs bin with args, waits until it prints a line starting with
// "ready" (within 20 s), and stops it by pid when the test ends.
func Start(t testing.TB, bin string, args ...string) *Target {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	// No Pdeathsig: it fires when the forking OS thread exits, and the
	// tracer threads under test exit on purpose. Targets are killed by pid
	// in the test's cleanup.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	tg := &Target{Cmd: cmd, PID: cmd.Process.Pid, stdin: stdin, out: bufio.NewReader(stdout), t: t}
	t.Cleanup(tg.Stop)
	line, err := tg.ReadLine(20 * time.Second)
	if err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("target %s did not get ready: %q %v", bin, line, err)
	}
	// Every target's main thread blocks in a system call right after
	// saying "ready": wait until it has, so tests see a settled process.
	WaitInSyscall(tg.PID, tg.PID, 5*time.Second)
	return tg
}

// WaitInSyscall waits until thread tid of pid is blocked in a system call
// (its /proc syscall line starts with a syscall number), at most d.
func WaitInSyscall(pid, tid int, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
		if err != nil {
			return false
		}
		if f := strings.Fields(string(b)); len(f) == 9 && f[0] != "-1" {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// ReadLine reads one line of the target's stdout within d.
func (tg *Target) ReadLine(d time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := tg.out.ReadString('\n')
		ch <- res{strings.TrimRight(s, "\n"), err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-time.After(d):
		return "", fmt.Errorf("no line from pid %d within %v", tg.PID, d)
	}
}

// Ask writes a command line to the target and returns its one-line answer.
func (tg *Target) Ask(cmd string) string {
	tg.t.Helper()
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if _, err := io.WriteString(tg.stdin, cmd+"\n"); err != nil {
		tg.t.Fatalf("writing to target: %v", err)
	}
	line, err := tg.ReadLine(10 * time.Second)
	if err != nil {
		tg.t.Fatalf("target answer: %v", err)
	}
	return line
}

// Stop kills the target by pid (SIGCONT first, in case a test stopped it)
// and reaps it.
func (tg *Target) Stop() {
	if tg.Cmd.ProcessState != nil {
		return
	}
	syscall.Kill(tg.PID, syscall.SIGCONT)
	syscall.Kill(tg.PID, syscall.SIGKILL)
	tg.stdin.Close()
	tg.Cmd.Wait()
}

// State returns the process state letter from /proc/PID/stat.
func State(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// ThreadStates returns each thread's state letter.
func ThreadStates(pid int) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		var tid int
		fmt.Sscan(e.Name(), &tid)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i >= 0 && i+2 < len(s) {
			out[tid] = s[i+2 : i+3]
		}
	}
	return out
}

// Skip skips the test with a stated reason; used only where the machine
// lacks a tool, never where it supports the feature.
func Skip(t testing.TB, reason string) {
	t.Helper()
	t.Skipf("skipped: %s", reason)
}

// Need skips unless tool is on PATH.
func Need(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		Skip(t, tool+" is not installed on this machine")
	}
	return p
}

// GoToolchain is one Go toolchain a test builds targets with.
type GoToolchain struct {
	Name string   // "go1.26"
	Go   string   // the go command
	Env  []string // extra environment (GOTOOLCHAIN=go1.27.3)
	// Extra marks a release beyond the three every machine tests
	// (go1.19, the installed one, go1.27), found already fetched in the
	// module cache: tests may cover it more lightly.
	Extra bool
}

// GoToolchains returns the installed Go (always) and the other releases
// tests cover when this machine has them: Debian's golang-1.19-go at
// /usr/lib/go-1.19, and go1.27.3 fetched by the go command itself
// (GOTOOLCHAIN; .ci/run fetches it ahead). missing names the ones absent.
func GoToolchains() (have []GoToolchain, missing []string) {
	have = append(have, GoToolchain{Name: Release(runtime.Version()), Go: "go", Env: []string{"GOTOOLCHAIN=local"}})
	if _, err := os.Stat("/usr/lib/go-1.19/bin/go"); err == nil {
		have = append(have, GoToolchain{Name: "go1.19", Go: "/usr/lib/go-1.19/bin/go", Env: []string{"GOTOOLCHAIN=local"}})
	} else {
		missing = append(missing, "go1.19 (apt-get install golang-1.19-go)")
	}
	tc := GoToolchain{Name: "go1.27", Go: "go", Env: []string{"GOTOOLCHAIN=go1.27.3"}}
	cmd := exec.Command(tc.Go, "version")
	cmd.Env = append(environWithout("GOROOT"), tc.Env...)
	if out, err := cmd.Output(); err == nil && strings.Contains(string(out), "go1.27") {
		have = append(have, tc)
	} else {
		missing = append(missing, "go1.27 (GOTOOLCHAIN=go1.27.3 go version)")
	}
	// Other releases the go command has fetched before (never fetched
	// here): golang.org/toolchain@v0.0.1-go1.N.P.linux-amd64.
	seen := map[string]bool{}
	for _, h := range have {
		seen[h.Name] = true
	}
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		dirs, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "golang.org", "toolchain@v0.0.1-go1.*.linux-"+runtime.GOARCH))
		for _, d := range dirs {
			v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "toolchain@v0.0.1-"), ".linux-"+runtime.GOARCH)
			if r := Release(v); !seen[r] {
				if _, err := os.Stat(filepath.Join(d, "bin", "go")); err == nil {
					seen[r] = true
					have = append(have, GoToolchain{Name: r, Go: "go", Env: []string{"GOTOOLCHAIN=" + v}, Extra: true})
				}
			}
		}
	}
	return have, missing
}

// Release is a Go version's release series: go1.26.8 -> go1.26.
func Release(v string) string {
	if i := strings.Index(v, "."); i >= 0 {
		if j := strings.IndexAny(v[i+1:], ".rb"); j >= 0 {
			return v[:i+1+j]
		}
	}
	return v
}

// BuildGo builds the Go program in testdata directory dir (a main module
// of its own, "go 1.19", so that every release builds it) with tc and
// flags (after "go build"), once per distinct input. env adds environment
// (CGO_ENABLED=1).
func BuildGo(t testing.TB, tc GoToolchain, dir string, env []string, flags ...string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	fmt.Fprintln(h, tc.Name, tc.Go, strings.Join(tc.Env, " "), strings.Join(env, " "), strings.Join(flags, " "))
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") && e.Name() != "go.mod" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(h, e.Name())
		h.Write(b)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	bin := filepath.Join(CacheDir(), filepath.Base(dir)+"-"+tc.Name+"-"+sum)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"build"}, flags...), "-o", bin+".tmp", ".")
	cmd := exec.Command(tc.Go, args...)
	cmd.Dir = dir
	cmd.Env = append(append(append(environWithout("GOROOT"), "GOWORK=off", "GOFLAGS="), tc.Env...), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", tc.Go, strings.Join(args, " "), err, out)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	os.WriteFile(bin+".cmd", []byte(fmt.Sprintf("cd %s && %s %s %s\n", dir, strings.Join(append(append([]string{}, tc.Env...), env...), " "), tc.Go, strings.Join(quoted, " "))), 0o644)
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// environWithout is the environment without the variable name (GOROOT,
// which would make one Go toolchain use another's standard library).
func environWithout(name string) []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}
