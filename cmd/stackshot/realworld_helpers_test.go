//go:build linux

package main

// End-to-end tests against real programs of this machine and real
// toolchains: python3, node, bash, sleep, cat, gdb, Go (plain, stripped,
// cgo), Rust (rustc's default linker), C++ at -O2, static, static-pie,
// non-PIE, lld-linked and stripped C, a binary that exists only in another
// mount namespace, a deleted and a replaced binary, a signal handler, a
// process whose main thread has exited. Expected values come from known
// chains in testdata/realworld/ and from independent tools (eu-stack's
// unwinder, nm, addr2line, go tool pprof).

//
// This file holds what the realworld_*_test.go files share.

import (
	"bufio"
	"bytes"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

func realSrc(elem ...string) string {
	return testutil.Testdata(append([]string{"realworld"}, elem...)...)
}

// buildGoTarget builds the Go program in testdata/realworld/DIR with extra
// go build flags, once per distinct source and flags (kept in the test
// build cache like testutil.Build's).
func buildGoTarget(t testing.TB, dir string, flags ...string) string {
	t.Helper()
	testutil.Need(t, "go")
	step := append(append([]string{"go", "build", "-o", "$OUT"}, flags...), "$SRC/main.go")
	return testutil.Artifact(t, "rw-"+dir, realSrc(dir), step)
}

// fnames lists a thread's physical user frames' names innermost first,
// "?" when unknown, with Go's ".abi0" and GCC's clone suffixes
// (".constprop.0", ".isra.0", ".part.0", ".cold") dropped but Go and Rust
// paths kept whole (userFuncs cuts at the first '.').
func fnames(th jThread) []string {
	var out []string
	for _, f := range th.Frames {
		if f.Kind != "user" || f.Inlined {
			continue
		}
		n := f.Fn()
		n = strings.TrimSuffix(n, ".abi0")
		for _, suf := range []string{".constprop.", ".isra.", ".part.", ".cold"} {
			if i := strings.Index(n, suf); i > 0 {
				n = n[:i]
			}
		}
		out = append(out, n)
	}
	return out
}

// hasSubseq reports whether want appears in order (not necessarily
// contiguous) in funcs.
func hasSubseq(funcs, want []string) bool {
	i := 0
	for _, f := range funcs {
		if i < len(want) && f == want[i] {
			i++
		}
	}
	return i == len(want)
}

func endsInThreadRoot(f []string) bool {
	return len(f) >= 2 && f[len(f)-2] == "start_thread" && strings.HasPrefix(strings.TrimLeft(f[len(f)-1], "_"), "clone")
}

// assertUntouched checks that the target is not traced and, unless it was
// stopped on purpose, that no thread is left stopped.
func assertUntouched(t testing.TB, pid int, wasStopped bool) {
	t.Helper()
	time.Sleep(10 * time.Millisecond)
	if tp := tracerPid(pid); tp != 0 {
		t.Errorf("target %d still traced by %d", pid, tp)
	}
	if wasStopped {
		return
	}
	for tid, s := range testutil.ThreadStates(pid) {
		if s == "t" || s == "T" {
			t.Errorf("thread %d of %d left in state %q", tid, pid, s)
		}
	}
}

func threadWith(p jProc, fn string) (jThread, bool) {
	for _, th := range p.Threads {
		for _, f := range fnames(th) {
			if f == fn {
				return th, true
			}
		}
	}
	return jThread{}, false
}

func mustThreadWith(t testing.TB, p jProc, fn string) jThread {
	t.Helper()
	th, ok := threadWith(p, fn)
	if !ok {
		var all [][]string
		for _, th := range p.Threads {
			all = append(all, fnames(th))
		}
		t.Fatalf("no thread has %q in its stack: %v", fn, all)
	}
	return th
}

var euFrame = regexp.MustCompile(`^#\d+\s+0x([0-9a-f]+)`)

// euStackPCs runs eu-stack on pid and returns each thread's frame PCs.
func euStackPCs(t testing.TB, pid int) map[int][]uint64 {
	t.Helper()
	out, err := exec.Command("eu-stack", "-p", strconv.Itoa(pid)).Output()
	if len(out) == 0 {
		t.Fatalf("eu-stack -p %d: %v", pid, err)
	}
	res := map[int][]uint64{}
	tid := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "TID ") {
			tid, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(l, "TID "), ":"))
			continue
		}
		if m := euFrame.FindStringSubmatch(l); m != nil && tid != 0 {
			v, _ := strconv.ParseUint(m[1], 16, 64)
			res[tid] = append(res[tid], v)
		}
	}
	return res
}

func userPCs(th jThread) []uint64 {
	var out []uint64
	for _, f := range th.Frames {
		if f.Kind != "user" || f.Inlined {
			continue
		}
		v, _ := strconv.ParseUint(strings.TrimPrefix(f.PC, "0x"), 16, 64)
		out = append(out, v)
	}
	return out
}

func stopTarget(t testing.TB, pid int) {
	t.Helper()
	syscall.Kill(pid, syscall.SIGSTOP)
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		all := true
		for _, s := range testutil.ThreadStates(pid) {
			if s != "T" {
				all = false
			}
		}
		if all {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("target %d did not stop", pid)
}

// compareWithEuStack stops the target, unwinds it with eu-stack and with
// stackshot, and requires stackshot's user PCs of every thread to start with
// eu-stack's (stackshot may go further, never less far or elsewhere).
func compareWithEuStack(t *testing.T, pid int) jProc {
	t.Helper()
	testutil.Need(t, "eu-stack")
	stopTarget(t, pid)
	defer syscall.Kill(pid, syscall.SIGCONT)
	eu := euStackPCs(t, pid)
	p := dumpJSON(t, strconv.Itoa(pid))
	if len(eu) == 0 {
		t.Fatalf("eu-stack gave no threads")
	}
	byTID := map[int]jThread{}
	for _, th := range p.Threads {
		byTID[th.TID] = th
	}
	for tid, want := range eu {
		th, ok := byTID[tid]
		if !ok {
			t.Errorf("thread %d: in eu-stack's output, not in stackshot's", tid)
			continue
		}
		got := userPCs(th)
		// A JVM's own frames (Java, walked by the code cache's layouts)
		// are compared with jstack elsewhere: eu-stack, which walks them
		// by frame pointers, misses one where compiled code keeps none.
		want = withoutPCs(want, javaPCs(th))
		n := len(want)
		if len(got) < n {
			t.Errorf("thread %d %q: stackshot has %d frames, eu-stack %d:\n got  %x\n want %x\n funcs %v (stop %q)",
				tid, th.Name, len(got), len(want), got, want, fnames(th), th.Stop)
			continue
		}
		for i := 0; i < n; i++ {
			if got[i] != want[i] {
				t.Errorf("thread %d %q: frame %d is %#x, eu-stack says %#x\n got  %x\n want %x\n funcs %v",
					tid, th.Name, i, got[i], want[i], got, want, fnames(th))
				break
			}
		}
	}
	// Still stopped after both tools, not traced.
	for tid, s := range testutil.ThreadStates(pid) {
		if s != "T" {
			t.Errorf("thread %d is %q after the dump of a stopped process, want T", tid, s)
		}
	}
	if tp := tracerPid(pid); tp != 0 {
		t.Errorf("target still traced by %d", tp)
	}
	return p
}

// startCmd starts an arbitrary program through `sh -c 'echo ready; exec ...'`
// so that testutil.Start's protocol applies; the pid stays the program's.
func startExec(t *testing.T, cmdline string) *testutil.Target {
	t.Helper()
	return testutil.Start(t, "/bin/sh", "-c", "echo ready; exec "+cmdline)
}

// javaPCs are the pcs of a thread's Java frames.
func javaPCs(th jThread) map[uint64]bool {
	out := map[uint64]bool{}
	for _, f := range th.Frames {
		if f.Kind == "java" {
			v, _ := strconv.ParseUint(strings.TrimPrefix(f.PC, "0x"), 16, 64)
			out[v] = true
		}
	}
	return out
}

// withoutPCs is pcs less those in drop.
func withoutPCs(pcs []uint64, drop map[uint64]bool) []uint64 {
	var out []uint64
	for _, pc := range pcs {
		if !drop[pc] {
			out = append(out, pc)
		}
	}
	return out
}
