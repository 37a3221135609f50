//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/sandbox"
)

// stackshotBin is the command under test, built once by TestMain.
var stackshotBin string

func TestMain(m *testing.M) {
	// Re-executed as a sandboxed child (a session of a test or benchmark,
	// STACKSHOT_SANDBOX=1): be the child, as stackshot itself is.
	if len(os.Args) > 1 && os.Args[1] == sandbox.ChildCommand {
		os.Exit(sandbox.Main())
	}
	dir, err := os.MkdirTemp("", "stackshot-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stackshotBin = filepath.Join(dir, "stackshot")
	// Every stackshot the tests run caches into this run's own directory,
	// never the user's: what an earlier run left there cannot change a
	// test (tests of the cache itself give their own directory).
	os.Setenv("STACKSHOT_CACHE_DIR", filepath.Join(dir, "cache"))
	linked := stackshotBin + ".linked"
	build := exec.Command("go", "build", "-o", linked, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Makefile builds it
	out, err := build.CombinedOutput()
	if err == nil {
		// Run a copy, as an installed binary is one: a file the linker
		// has just written started 0.5-1.4 ms slower per run than a copy
		// of it (the benchmarks compare against copied builds).
		out, err = exec.Command("cp", linked, stackshotBin).CombinedOutput()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "building stackshot: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs stackshot and returns stdout, stderr and the exit code.
func runSS(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(stackshotBin, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running stackshot: %v", err)
	}
	return so.String(), se.String(), code
}

// The JSON of the command-line contract, schema 1 (testutil's reading).
type (
	jProc   = testutil.DumpProcess
	jThread = testutil.DumpThread
	jFrame  = testutil.JSONFrame
)

func dumpJSON(t testing.TB, args ...string) jProc {
	t.Helper()
	out, errOut, code := runSS(t, append([]string{"dump", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("stackshot %v: exit %d\n%s", args, code, errOut)
	}
	var p jProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	return p
}

// userFuncs lists the names of a thread's physical user frames, innermost
// first ("?" when unknown), with "."-suffixes of compiler clones dropped.
func userFuncs(th jThread) []string {
	var out []string
	for _, f := range th.Frames {
		if f.Kind != "user" || f.Inlined {
			continue
		}
		n := f.Fn()
		if i := strings.IndexAny(n, ".@"); i > 0 {
			n = n[:i]
		}
		out = append(out, n)
	}
	return out
}

func kernelFrames(th jThread) int {
	n := 0
	for _, f := range th.Frames {
		if f.Kind == "kernel" {
			n++
		}
	}
	return n
}

// hasChain reports whether chain appears in funcs as a contiguous run.
func hasChain(funcs, chain []string) bool {
	for i := 0; i+len(chain) <= len(funcs); i++ {
		ok := true
		for j := range chain {
			if funcs[i+j] != chain[j] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func threadByName(t testing.TB, p jProc, name string) jThread {
	t.Helper()
	// A spawned thread first: the main thread carries the binary's name,
	// which may be the same (the target coro names a thread "coro").
	for _, th := range p.Threads {
		if th.Name == name && th.TID != p.PID {
			return th
		}
	}
	for _, th := range p.Threads {
		if th.Name == name {
			return th
		}
	}
	t.Fatalf("no thread named %q in %d threads", name, len(p.Threads))
	return jThread{}
}

// assertThreadChain checks that a thread spawned with pthread_create shows
// chain (innermost first) and unwinds to its root through start_thread.
func assertThreadChain(t testing.TB, th jThread, chain ...string) {
	t.Helper()
	f := userFuncs(th)
	if !hasChain(f, chain) {
		t.Errorf("thread %q: want chain %v in %v (stop %q)", th.Name, chain, f, th.Stop)
		return
	}
	if len(f) < 2 || f[len(f)-2] != "start_thread" || !strings.HasPrefix(strings.TrimLeft(f[len(f)-1], "_"), "clone") {
		t.Errorf("thread %q: want the stack to end in start_thread, clone3: %v (stop %q)", th.Name, f, th.Stop)
	}
	if th.Error != nil {
		t.Errorf("thread %q: error %q", th.Name, *th.Error)
	}
}

// assertMainChain checks the main thread's chain down to _start.
func assertMainChain(t testing.TB, th jThread, chain ...string) {
	t.Helper()
	f := userFuncs(th)
	if !hasChain(f, chain) {
		t.Errorf("main thread: want chain %v in %v (stop %q)", chain, f, th.Stop)
		return
	}
	if len(f) == 0 || f[len(f)-1] != "_start" {
		t.Errorf("main thread: want the stack to end in _start: %v (stop %q)", f, th.Stop)
	}
}

var blockedVariants = []struct {
	name  string
	flags []string
}{
	{"O0-fp", []string{"-O0", "-g", "-fno-omit-frame-pointer", "-pthread"}},
	{"O2-nofp", []string{"-O2", "-g", "-fomit-frame-pointer", "-pthread"}},
}

func buildBlocked(t testing.TB, flags []string) string {
	return testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, flags...)
}

func checkBlocked(t *testing.T, p jProc, pid int) {
	t.Helper()
	if p.Schema != 1 || p.PID != pid {
		t.Fatalf("schema %d pid %d", p.Schema, p.PID)
	}
	if len(p.Threads) != 7 {
		t.Fatalf("want 7 threads, got %d", len(p.Threads))
	}
	if p.Threads[0].TID != pid {
		t.Errorf("first thread is %d, want the main thread %d", p.Threads[0].TID, pid)
	}
	want := map[string]struct {
		chain   []string
		syscall string
	}{
		"reader":    {[]string{"reader_c", "reader_b", "reader_a", "start"}, "read"},
		"condwait":  {[]string{"cond_c", "cond_b", "cond_a", "start"}, "futex"},
		"sleeper":   {[]string{"sleep_c", "sleep_b", "sleep_a", "start"}, "clock_nanosleep"},
		"epoller":   {[]string{"epoll_c", "epoll_b", "epoll_a", "start"}, "epoll_wait"},
		"recver":    {[]string{"recv_c", "recv_b", "recv_a", "start"}, "recvfrom"},
		"sigwaiter": {[]string{"sigw_c", "sigw_b", "sigw_a", "start"}, "rt_sigtimedwait"},
	}
	for name, w := range want {
		th := threadByName(t, p, name)
		if th.State != "S" {
			t.Errorf("%s: state %q, want S", name, th.State)
		}
		// After an earlier ptrace stop, the kernel resumes an interrupted
		// nanosleep through restart_syscall.
		if th.Syscall == nil || (th.Syscall.Name != w.syscall && !(w.syscall == "clock_nanosleep" && th.Syscall.Name == "restart_syscall")) {
			t.Errorf("%s: syscall %+v, want %s", name, th.Syscall, w.syscall)
		}
		assertThreadChain(t, th, w.chain...)
		if kernelFrames(th) == 0 {
			t.Errorf("%s: no kernel frames", name)
		}
		for _, f := range th.Frames {
			if f.Kind == "kernel" && f.Method != "kernel" {
				t.Errorf("%s: kernel frame with method %q", name, f.Method)
			}
		}
		// Kernel frames come first, then user frames.
		seenUser := false
		for _, f := range th.Frames {
			if f.Kind == "user" {
				seenUser = true
			} else if seenUser {
				t.Errorf("%s: kernel frame after a user frame", name)
			}
		}
	}
	main := p.Threads[0]
	if main.Syscall == nil || main.Syscall.Name != "read" {
		t.Errorf("main: syscall %+v, want read", main.Syscall)
	}
	assertMainChain(t, main, "main_wait", "main")
	// The innermost user frame of the reader is libc's read wrapper,
	// found from the registers, in libc.
	th := threadByName(t, p, "reader")
	for _, f := range th.Frames {
		if f.Kind == "user" {
			if f.Method != "regs" || !strings.Contains(filepath.Base(f.Module), "libc.so") {
				t.Errorf("reader: first user frame %+v, want libc's read from the registers", f)
			}
			if f.BuildID == "" || f.ModuleOffset == "" {
				t.Errorf("reader: first user frame lacks build id or module offset: %+v", f)
			}
			break
		}
	}
}

func TestDumpBlockedChainsJSON(t *testing.T) {
	for _, v := range blockedVariants {
		t.Run(v.name, func(t *testing.T) {
			tg := testutil.Start(t, buildBlocked(t, v.flags))
			p := dumpJSON(t, fmt.Sprint(tg.PID))
			checkBlocked(t, p, tg.PID)
			if testutil.State(tg.PID) == "t" || testutil.State(tg.PID) == "T" {
				t.Errorf("target left stopped")
			}
		})
	}
}

func TestDumpModes(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[1].flags))
	for _, mode := range []string{"stop", "auto"} {
		t.Run(mode, func(t *testing.T) {
			p := dumpJSON(t, "--mode", mode, fmt.Sprint(tg.PID))
			checkBlocked(t, p, tg.PID)
			for _, th := range p.Threads {
				if mode == "stop" && th.Capture != "ptrace" {
					t.Errorf("%s: capture %q in stop mode", th.Name, th.Capture)
				}
			}
		})
	}
	t.Run("consistent", func(t *testing.T) {
		p := dumpJSON(t, "--consistent", fmt.Sprint(tg.PID))
		checkBlocked(t, p, tg.PID)
	})
}

func TestDumpText(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags), "spin")
	out, errOut, code := runSS(t, "-s", fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		fmt.Sprintf("Process %d (", tg.PID),
		fmt.Sprintf("Thread %d ", tg.PID),
		`"reader" (state S, in read`,
		`"condwait" (state S, in futex`,
		`"spinner" (state R, running`,
		" in reader_c ",
		" in reader_b ",
		" in spin_c ",
		" in main_wait ",
		"blocked.c:",
		"[kernel]",
		"--- read(3, …) on pipe:[",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	// Frames are numbered from #0 within each thread.
	if !strings.Contains(out, "\n#0 ") {
		t.Errorf("no #0 frame:\n%s", out)
	}
}

func TestDumpSeveralPIDs(t *testing.T) {
	bin := buildBlocked(t, blockedVariants[0].flags)
	a, b := testutil.Start(t, bin), testutil.Start(t, bin)
	out, errOut, code := runSS(t, "dump", "--json", "-p", fmt.Sprint(a.PID), fmt.Sprint(b.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ps []jProc
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Fatalf("want a JSON array: %v", err)
	}
	if len(ps) != 2 || ps[0].PID != b.PID && ps[0].PID != a.PID {
		t.Fatalf("got %d processes", len(ps))
	}
}

func TestDumpThreadFilter(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	p := dumpJSON(t, fmt.Sprint(tg.PID))
	reader := threadByName(t, p, "reader")
	q := dumpJSON(t, "-t", fmt.Sprint(reader.TID), fmt.Sprint(tg.PID))
	if len(q.Threads) != 1 || q.Threads[0].TID != reader.TID {
		t.Fatalf("-t %d gave %d threads", reader.TID, len(q.Threads))
	}
}

func TestDumpNoKernel(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	p := dumpJSON(t, "--no-kernel", fmt.Sprint(tg.PID))
	for _, th := range p.Threads {
		if kernelFrames(th) != 0 {
			t.Errorf("%s: kernel frames with --no-kernel", th.Name)
		}
	}
}

func TestDump64Threads(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "64")
	p := dumpJSON(t, fmt.Sprint(tg.PID))
	if len(p.Threads) != 65 {
		t.Fatalf("want 65 threads, got %d", len(p.Threads))
	}
	for i := 0; i < 64; i++ {
		th := threadByName(t, p, fmt.Sprintf("w-%03d", i))
		assertThreadChain(t, th, "work_b", "work_a", "start")
	}
}

func TestDumpThreadChurn(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "churn.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin)
	for i := 0; i < 30; i++ {
		p := dumpJSON(t, fmt.Sprint(tg.PID))
		assertThreadChain(t, threadByName(t, p, "steady"), "steady_b", "steady_a", "steady_start")
		for _, th := range p.Threads {
			if th.Error != nil && th.Name != "churner" && !strings.Contains(*th.Error, "exited") {
				t.Errorf("dump %d: thread %d %q: %s", i, th.TID, th.Name, *th.Error)
			}
		}
	}
	if s := testutil.State(tg.PID); s == "t" || s == "T" {
		t.Fatalf("target left stopped (%s)", s)
	}
	before := tg.Ask("s")
	time.Sleep(300 * time.Millisecond)
	if after := tg.Ask("s"); after == before {
		t.Errorf("target stopped churning: %s", after)
	}
}

func waitState(pid int, want string, d time.Duration) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if testutil.State(pid) == want {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func TestDumpStoppedTargetStaysStopped(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	syscall.Kill(tg.PID, syscall.SIGSTOP)
	if !waitState(tg.PID, "T", 5*time.Second) {
		t.Fatalf("target did not stop")
	}
	for _, mode := range []string{"auto", "stop"} {
		p := dumpJSON(t, "--mode", mode, fmt.Sprint(tg.PID))
		if len(p.Threads) != 7 {
			t.Errorf("want 7 threads, got %d", len(p.Threads))
		}
		assertThreadChain(t, threadByName(t, p, "reader"), "reader_c", "reader_b", "reader_a")
		time.Sleep(20 * time.Millisecond)
		for tid, s := range testutil.ThreadStates(tg.PID) {
			if s != "T" {
				t.Errorf("mode %s: thread %d is %q after the dump, want T (still stopped)", mode, tid, s)
			}
		}
	}
	syscall.Kill(tg.PID, syscall.SIGCONT)
	if !waitState(tg.PID, "S", 5*time.Second) {
		t.Errorf("target did not resume after SIGCONT")
	}
	if ans := tg.Ask("s"); !strings.HasPrefix(ans, "eintr") {
		t.Errorf("target does not answer after resume: %q", ans)
	}
}

func TestDumpKilledMidDumpLeavesTargetRunning(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	for _, kind := range []string{"blocked", "spin"} {
		t.Run(kind, func(t *testing.T) {
			args := []string{"256"}
			if kind == "spin" {
				args = append(args, "spin")
			}
			// 256 spinning threads on a loaded machine: their ready line
			// and settling can take long (bounded generously).
			tg := testutil.StartWithin(t, 3*time.Minute, bin, args...)
			for i := 0; i < 15; i++ {
				cmd := exec.Command(stackshotBin, "--mode", "stop", fmt.Sprint(tg.PID))
				if i%2 == 1 {
					cmd.Args = append(cmd.Args, "--consistent")
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Duration(2+i*3) * time.Millisecond)
				cmd.Process.Kill()
				cmd.Wait()
				// The kernel detaches the tracees as the tracer thread
				// exits and wakes them; a thread seen stopped for a moment
				// on a loaded machine is on its way. Left stopped is what
				// must never be: still stopped or traced after 10 s.
				start := time.Now()
				for {
					tid, st := stoppedThread(tg.PID)
					tp := tracerPid(tg.PID)
					if tid == 0 && tp == 0 {
						break
					}
					if time.Since(start) > 10*time.Second {
						t.Fatalf("round %d: thread %d left in state %q, tracer %d, 10 s after stackshot was killed", i, tid, st, tp)
					}
					time.Sleep(5 * time.Millisecond)
				}
				if d := time.Since(start); d > 50*time.Millisecond {
					t.Logf("round %d: the target was released %v after stackshot's exit", i, d)
				}
			}
		})
	}
}

// stoppedThread is a thread of pid in a stopped state (t or T), or 0.
func stoppedThread(pid int) (int, string) {
	for tid, s := range testutil.ThreadStates(pid) {
		if s == "t" || s == "T" {
			return tid, s
		}
	}
	return 0, ""
}

func tracerPid(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "TracerPid:") {
			var n int
			fmt.Sscan(strings.TrimPrefix(l, "TracerPid:"), &n)
			return n
		}
	}
	return -1
}

func TestDumpSIGINTDetaches(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "512")
	interrupted := 0
	for i := 0; i < 6; i++ {
		// Odd rounds: --consistent keeps every thread traced while it
		// copies 512 of them, and the signal is sent once the target is
		// seen traced, so it lands inside the capture. Even rounds: at
		// varying times, wherever that is.
		consistent := i%2 == 1
		cmd := exec.Command(stackshotBin, "--mode", "stop", fmt.Sprint(tg.PID))
		if consistent {
			cmd.Args = append(cmd.Args, "--consistent")
		}
		var se bytes.Buffer
		var so bytes.Buffer
		cmd.Stderr, cmd.Stdout = &se, &so
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if consistent {
			for end := time.Now().Add(10 * time.Second); tracerPid(tg.PID) == 0 && time.Now().Before(end); {
				time.Sleep(100 * time.Microsecond)
			}
		} else {
			time.Sleep(time.Duration(5+i*4) * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		if err == nil && so.Len() == 0 {
			t.Errorf("round %d: exit 0 with nothing written", i)
		}
		if err != nil && so.Len() != 0 {
			t.Errorf("round %d: interrupted but wrote a partial report", i)
		}
		if consistent && err != nil {
			interrupted++
		}
		for tid, s := range testutil.ThreadStates(tg.PID) {
			if s == "t" || s == "T" {
				t.Fatalf("round %d: thread %d left in state %q after SIGINT", i, tid, s)
			}
		}
		if tp := tracerPid(tg.PID); tp != 0 {
			t.Fatalf("round %d: target still traced by %d", i, tp)
		}
	}
	t.Logf("%d of 3 consistent captures interrupted", interrupted)
	if interrupted == 0 {
		t.Errorf("no SIGINT landed inside a consistent capture: the test proved nothing")
	}
}

func TestDumpNoSuchPID(t *testing.T) {
	// A pid that is certainly free: a child we started and reaped.
	c := exec.Command("true")
	c.Run()
	_, errOut, code := runSS(t, fmt.Sprint(c.Process.Pid))
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.HasPrefix(errOut, "stackshot: cannot read process") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("want one line 'stackshot: cannot read process ...', got %q", errOut)
	}
}

func TestDumpBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"dump"},
		{"dump", "notapid"},
		{"dump", "--mode", "sideways", "1"},
		{"dump", "--format", "svg", "1"},
		{"dump", "--no-such-flag", "1"},
		{"dump", "--max-frames", "0", "1"},
	} {
		out, errOut, code := runSS(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if out != "" {
			t.Errorf("%v: wrote to stdout: %q", args, out)
		}
		if !strings.HasPrefix(errOut, "stackshot: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: want a one-line error, got %q", args, errOut)
		}
	}
}

func TestDumpKernelThread(t *testing.T) {
	// kthreadd is pid 2 on every Linux system.
	p := dumpJSON(t, "2")
	if len(p.Threads) != 1 {
		t.Fatalf("want 1 thread, got %d", len(p.Threads))
	}
	th := p.Threads[0]
	if th.Capture != "proc-only" {
		t.Errorf("capture %q, want proc-only", th.Capture)
	}
	for _, f := range th.Frames {
		if f.Kind != "kernel" {
			t.Errorf("kernel thread with a user frame: %+v", f)
		}
	}
	if kernelFrames(th) == 0 {
		t.Errorf("no kernel frames for kthreadd")
	}
	if th.Error == nil || !strings.Contains(*th.Error, "kernel thread") {
		t.Errorf("error %v, want a kernel-thread note", th.Error)
	}
}

func TestDumpZombie(t *testing.T) {
	c := exec.Command("true")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	if !waitState(c.Process.Pid, "Z", 5*time.Second) {
		t.Fatalf("child did not become a zombie")
	}
	p := dumpJSON(t, fmt.Sprint(c.Process.Pid))
	if p.State != "Z" {
		t.Errorf("state %q, want Z", p.State)
	}
	if len(p.Warnings) == 0 || !strings.Contains(p.Warnings[0], "zombie") {
		t.Errorf("warnings %v, want a zombie note", p.Warnings)
	}
}

func TestDumpAlreadyTraced(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	tracer := exec.Command("gdb", "-q", "-batch", "-p", fmt.Sprint(tg.PID), "-ex", "shell sleep 5")
	if _, err := exec.LookPath("gdb"); err != nil {
		testutil.Skip(t, "gdb is not installed")
	}
	tracer.Stdout, tracer.Stderr = nil, nil
	if err := tracer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { tracer.Process.Kill(); tracer.Wait() }()
	end := time.Now().Add(10 * time.Second)
	for tracerPid(tg.PID) == 0 && time.Now().Before(end) {
		time.Sleep(10 * time.Millisecond)
	}
	if tracerPid(tg.PID) == 0 {
		t.Fatal("gdb did not attach")
	}
	start := time.Now()
	out, errOut, code := runSS(t, "--json", fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if time.Since(start) > 8*time.Second {
		t.Errorf("dump of a traced process took %v", time.Since(start))
	}
	var p jProc
	json.Unmarshal([]byte(out), &p)
	if len(p.Warnings) == 0 || !strings.Contains(p.Warnings[0], "already traced by pid") {
		t.Errorf("warnings %v, want 'already traced by pid'", p.Warnings)
	}
	if len(p.Threads) != 7 {
		t.Errorf("want the 7 threads from /proc, got %d", len(p.Threads))
	}
}

// A vfork parent cannot reach a ptrace stop until its child leaves: the
// dump must not hang on it, must report it from /proc, and must leave it
// untraced and running once the child is gone.
func TestDumpVforkParentDoesNotHang(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "vfork.c")}, "-O0", "-g", "-fno-omit-frame-pointer")
	for _, mode := range []string{"stop", "auto"} {
		t.Run(mode, func(t *testing.T) {
			// The child holds the parent in vfork for 8 s; the dump must
			// be over while it still does (no timing: an ordering).
			tg := testutil.Start(t, bin, "8000")
			p := dumpJSON(t, "--mode", mode, fmt.Sprint(tg.PID))
			if s := testutil.State(tg.PID); s != "D" {
				t.Errorf("the dump returned only after the vfork ended (parent state %q): it waited for a thread that cannot stop", s)
			}
			th := p.Threads[0]
			if th.State != "D" {
				t.Errorf("state %q, want D (vfork parent)", th.State)
			}
			if th.Syscall == nil || !strings.Contains(th.Syscall.Name, "vfork") {
				t.Errorf("syscall %+v, want vfork", th.Syscall)
			}
			if kernelFrames(th) == 0 {
				t.Errorf("no kernel frames from /proc")
			}
			switch mode {
			case "stop":
				if th.Capture != "proc-only" || th.Error == nil || !strings.Contains(*th.Error, "did not stop") {
					t.Errorf("capture %q error %v, want proc-only and 'did not stop'", th.Capture, th.Error)
				}
			case "auto":
				// Blocked in a syscall: read without a stop, full chain.
				if th.Capture != "nostop" {
					t.Errorf("capture %q, want nostop", th.Capture)
				}
				assertMainChain(t, th, "vf_b", "vf_a", "main")
			}
			if line, err := tg.ReadLine(20 * time.Second); err != nil || line != "back" {
				t.Fatalf("parent did not come back from vfork: %q %v", line, err)
			}
			time.Sleep(20 * time.Millisecond)
			if s := testutil.State(tg.PID); s == "t" || s == "T" {
				t.Errorf("parent left stopped (%s)", s)
			}
			if tp := tracerPid(tg.PID); tp != 0 {
				t.Errorf("parent still traced by %d", tp)
			}
		})
	}
}

type eintrCounts struct{ read, cond, sleep, epoll, recv, sigwait int }

func parseEINTR(t testing.TB, ans string) eintrCounts {
	t.Helper()
	var e eintrCounts
	if _, err := fmt.Sscanf(ans, "eintr read=%d cond=%d sleep=%d epoll=%d recv=%d sigwait=%d",
		&e.read, &e.cond, &e.sleep, &e.epoll, &e.recv, &e.sigwait); err != nil {
		t.Fatalf("answer %q: %v", ans, err)
	}
	return e
}

// JIT code in an anonymous mapping is named through /tmp/perf-PID.map and
// unwound through (it keeps a frame pointer, as JITs usually do).
func TestDumpJITPerfMap(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "jit.c")}, "-O2", "-g")
	tg := testutil.Start(t, bin)
	t.Cleanup(func() { os.Remove(fmt.Sprintf("/tmp/perf-%d.map", tg.PID)) })
	p := dumpJSON(t, fmt.Sprint(tg.PID))
	assertMainChain(t, p.Threads[0], "jit_blocker", "jit_trampoline", "run_jit", "main")
}

// A signal that arrives while a thread is stopped is handed back at
// detach: real-time signals queue, so the target must handle every one.
func TestDumpLosesNoSignal(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[1].flags), "spin")
	p := dumpJSON(t, "--no-kernel", fmt.Sprint(tg.PID))
	spinner := threadByName(t, p, "spinner").TID
	var sent atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// SIGRTMIN+1; real-time signals queue (RLIMIT_SIGPENDING).
			if syscall.Tgkill(tg.PID, spinner, syscall.Signal(34+1)) == nil {
				sent.Add(1)
			} else {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	dumps := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); dumps++ {
		if _, errOut, code := runSS(t, "--mode", "stop", "--no-kernel", "-t", fmt.Sprint(spinner), fmt.Sprint(tg.PID)); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	}
	close(stop)
	<-done
	n := sent.Load()
	// The target may still be working through its queue: wait until it
	// has caught up (or stops making progress).
	want := fmt.Sprintf("rt %d", n)
	ans, last := "", ""
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if ans = tg.Ask("r"); ans == want || (ans == last && last != "") {
			break
		}
		last = ans
	}
	if ans != want {
		t.Errorf("after %d dumps the target handled %q of %d signals", dumps, ans, n)
	}
}
