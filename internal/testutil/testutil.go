// Package testutil builds test targets from testdata/ at test time, starts
// them, and stops them (by pid, never by name).
package testutil

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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
// (testdata/build, ignored by git), keyed by the hash of their inputs.
func CacheDir() string { return Testdata("build") }

// Build compiles sources with compiler (gcc, g++, rustc...) and flags: an
// Artifact of one step.
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
	step := append(append([]string{compiler}, srcs...), flags...)
	step = append(step, "-o", "$OUT")
	name := strings.TrimSuffix(filepath.Base(srcs[0]), filepath.Ext(srcs[0]))
	return ArtifactErr(name, filepath.Dir(srcs[0]), step)
}

// Artifact returns the file that steps make from the sources in the
// directory src: built once per distinct input (the steps, the toolchains'
// versions and every file under src) and kept in CacheDir across runs. Each
// step is a command line run in a scratch directory; "$OUT" is replaced by
// the file to make, "$SRC" by src, "$DIR" by the scratch directory. The
// commands are recorded next to the result in NAME.cmd. This is the one
// fixture builder of the project's tests.
func Artifact(t testing.TB, name, src string, steps ...[]string) string {
	t.Helper()
	out, err := ArtifactErr(name, src, steps...)
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	return out
}

// ArtifactErr is Artifact without a testing.TB.
func ArtifactErr(name, src string, steps ...[]string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	src, err := filepath.Abs(src)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, name, toolchains())
	for _, st := range steps {
		fmt.Fprintf(h, "%q\n", st)
	}
	if err := hashTree(h, src); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	// The file keeps its name (a library is found by it) in a directory
	// named for the inputs; it is built in a scratch copy of that
	// directory, renamed into place when every step has succeeded.
	final := filepath.Join(CacheDir(), name+"-"+sum)
	out := filepath.Join(final, name)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	scratch := final + ".tmp"
	os.RemoveAll(scratch)
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	var log strings.Builder
	for _, st := range steps {
		args := make([]string, len(st))
		for i, a := range st {
			a = strings.ReplaceAll(a, "$OUT", filepath.Join(scratch, name))
			a = strings.ReplaceAll(a, "$SRC", src)
			a = strings.ReplaceAll(a, "$DIR", scratch)
			args[i] = a
		}
		fmt.Fprintf(&log, "%q\n", args)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = scratch
		// For this machine unless a step says otherwise: an arm64 test
		// binary run under emulation has GOARCH=arm64 from go test.
		cmd.Env = environWithout("GOARCH")
		if o, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, o)
		}
	}
	os.WriteFile(filepath.Join(scratch, name+".cmd"), []byte(log.String()), 0o644)
	os.RemoveAll(final)
	return out, os.Rename(scratch, final)
}

// hashTree hashes the names and contents of the regular files under dir.
func hashTree(h io.Writer, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintln(h, strings.TrimPrefix(p, dir))
		h.Write(b)
		return nil
	})
}

var toolchainIDs string

// toolchains names the versions of the compilers targets are built with:
// a new toolchain rebuilds them.
func toolchains() string {
	if toolchainIDs == "" {
		for _, c := range []string{"gcc", "g++", "go", "rustc"} {
			toolchainIDs += compilerVersion(c) + ";"
		}
	}
	return toolchainIDs
}

var versions = map[string]string{}

// compilerVersion is the first line of `compiler --version` (cached): built
// targets are keyed on it, so a new toolchain rebuilds them.
func compilerVersion(compiler string) string {
	if v, ok := versions[compiler]; ok {
		return v
	}
	arg := "--version"
	if compiler == "go" {
		arg = "version"
	}
	out, _ := exec.Command(compiler, arg).Output()
	v, _, _ := strings.Cut(string(out), "\n")
	versions[compiler] = v
	return v
}

// Target is a running test target.
type Target struct {
	Cmd   *exec.Cmd
	PID   int
	Ready string // the "ready" line the target printed
	stdin io.WriteCloser
	out   *bufio.Reader
	t     testing.TB
	mu    sync.Mutex
}

// Start runs bin with args, waits until it prints a line starting with
// "ready" (within 20 s), and stops it by pid when the test ends.
func Start(t testing.TB, bin string, args ...string) *Target {
	t.Helper()
	return StartWithin(t, 20*time.Second, bin, args...)
}

// StartWithin is Start for a target that may take up to d to get ready
// and settle (a JVM on a loaded machine).
func StartWithin(t testing.TB, d time.Duration, bin string, args ...string) *Target {
	t.Helper()
	NeedLive(t)
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
	line, err := tg.ReadLine(d)
	if err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("target %s did not get ready: %q %v", bin, line, err)
	}
	tg.Ready = line
	// Every target's threads either block in a system call or spin once
	// it has said "ready": wait until each has, so tests see a settled
	// process.
	if !WaitSettled(tg.PID, d) {
		t.Fatalf("target %s (pid %d): its threads did not settle (blocked in a system call, or spinning) within %v", bin, tg.PID, d)
	}
	return tg
}

// WaitSettled waits until every thread of pid is either blocked in a
// system call (its /proc syscall line starts with a number) or spinning
// (it has used 5 ms of CPU time since first seen outside one: a thread on
// its way to a blocking call uses microseconds), at most d.
func WaitSettled(pid int, d time.Duration) bool {
	end := time.Now().Add(d)
	firstRun := map[int]uint64{} // CPU ns when first seen running
	for {
		settled := true
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return false
		}
		for _, e := range ents {
			tid, _ := strconv.Atoi(e.Name())
			if st := taskState(pid, tid); st == "Z" || st == "X" || st == "" {
				continue // exited (a leader that left its threads behind)
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
			if err != nil {
				continue // exited
			}
			if f := strings.Fields(string(b)); len(f) == 9 && f[0] != "-1" {
				continue // blocked in a system call
			}
			ran := cpuNS(pid, tid)
			if first, ok := firstRun[tid]; !ok {
				firstRun[tid] = ran
				settled = false
			} else if ran-first < uint64(5*time.Millisecond) {
				settled = false
			}
		}
		if settled {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// taskState is a thread's state letter from its stat file ("" when gone).
func taskState(pid, tid int) string {
	if _, f := taskStat(pid, tid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// taskStat is a thread's name and the fields of its stat file after the
// name, the state first (none when it is gone). (procmaps.ParseStat is the
// product's; its own tests use this package.)
func taskStat(pid, tid int) (comm string, fields []string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if err != nil || open < 0 || close < open {
		return "", nil
	}
	return s[open+1 : close], strings.Fields(s[close+1:])
}

// cpuNS is the CPU time a thread has used (schedstat's first field).
func cpuNS(pid, tid int) uint64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
	var ns uint64
	fmt.Sscan(string(b), &ns)
	return ns
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

// WaitInSyscallNr waits until thread tid of pid is blocked in system call
// nr, at most d. A thread that takes a lock on its way into the call (a
// Python thread taking the GIL back before input() reads) is in futex
// first: tests that assert the call wait for it.
func WaitInSyscallNr(pid, tid, nr int, d time.Duration) bool {
	end := time.Now().Add(d)
	want := strconv.Itoa(nr)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
		if err != nil {
			return false
		}
		if f := strings.Fields(string(b)); len(f) == 9 && f[0] == want {
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
func State(pid int) string { return taskState(pid, pid) }

// ThreadStates returns each thread's state letter.
func ThreadStates(pid int) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if st := taskState(pid, tid); st != "" {
			out[tid] = st
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

// NeedLive skips a test that attaches to live targets when the test
// binary is not an x86-64 one: the targets are built for this x86-64
// machine, and an arm64 test binary runs under qemu's user emulation,
// which has no ptrace (the offline packages' tests run that way too).
func NeedLive(t testing.TB) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		Skip(t, "live targets are x86-64 programs, and this is a "+runtime.GOARCH+" test binary (under emulation: no ptrace)")
	}
}

// Need skips unless tool is on PATH. With STACKSHOT_STRICT=1 (CI, whose
// .ci/run installs every tool the tests use) a missing tool fails the test
// instead: a skip there would hide a missing install step.
func Need(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("STACKSHOT_STRICT") == "1" {
			t.Fatalf("%s is not installed, and STACKSHOT_STRICT=1 asks for every tool the tests use (.ci/run installs them)", tool)
		}
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
	// In dir, without GOROOT (which would make one toolchain use
	// another's standard library), outside any workspace.
	step := []string{"sh", "-c", `cd "$1" && shift && exec env -u GOROOT "$@"`, "sh", "$SRC", "GOWORK=off", "GOFLAGS="}
	step = append(append(append(step, tc.Env...), env...), tc.Go, "build")
	step = append(append(step, flags...), "-o", "$OUT", ".")
	return Artifact(t, filepath.Base(dir)+"-"+tc.Name, dir, step)
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
