//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/testutil"
)

// serviceUID is the uid the sandbox tests run their targets as: a service
// account, neither root nor nobody.
const serviceUID = 1000

// startService starts blocked.c as serviceUID: the process of another
// user that root dumps, whose parsing goes to the sandboxed child.
func startService(t *testing.T) *testutil.Target {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the sandbox runs for targets of another user")
	}
	setpriv := testutil.Need(t, "setpriv")
	bin := buildBlocked(t, blockedVariants[1].flags)
	return testutil.Start(t, setpriv, "--reuid", fmt.Sprint(serviceUID), "--regid", fmt.Sprint(serviceUID), "--clear-groups", "--", bin)
}

// A dump of another user's process (through the sandboxed child, the
// default) shows the frames an in-process dump (--no-sandbox) shows:
// every thread's chain, with file and line.
func TestSandboxDumpSameFrames(t *testing.T) {
	tg := startService(t)
	boxed := dumpJSON(t, fmt.Sprint(tg.PID))
	plain := dumpJSON(t, "--no-sandbox", fmt.Sprint(tg.PID))
	checkBlocked(t, boxed, tg.PID)
	chains := func(p jProc) map[string]string {
		out := map[string]string{}
		for _, th := range p.Threads {
			var fs []string
			for _, f := range th.Frames {
				name := "?"
				if f.Function != nil {
					name = *f.Function
				}
				fs = append(fs, fmt.Sprintf("%s %s:%d", name, f.File, f.Line))
			}
			out[th.Name] = strings.Join(fs, " <- ")
		}
		return out
	}
	b, p := chains(boxed), chains(plain)
	for name, want := range p {
		if b[name] != want {
			t.Errorf("thread %s:\n sandbox     %s\n --no-sandbox %s", name, b[name], want)
		}
	}
}

// The sandboxed child crashing (test hook) costs the other user's process
// its names, said on stderr and in each thread's error; a process of
// stackshot's own user in the same dump (not sandboxed) is shown whole,
// and the dump succeeds.
func TestSandboxCrashCostsOnlyNames(t *testing.T) {
	bin := hookedBin(t)
	svc := startService(t)
	own := testutil.Start(t, buildBlocked(t, blockedVariants[1].flags))
	for _, hook := range []string{"crash", "oom"} {
		cmd := exec.Command(bin, "dump", "--json", fmt.Sprint(svc.PID), fmt.Sprint(own.PID))
		cmd.Env = append(os.Environ(), "STACKSHOT_TEST_SANDBOX_HOOK="+hook, "STACKSHOT_SANDBOX=")
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", hook, err, se.String())
		}
		if want := fmt.Sprintf("names of process %d lost: the sandboxed parser failed", svc.PID); !strings.Contains(se.String(), want) {
			t.Errorf("%s: stderr lacks %q:\n%s", hook, want, se.String())
		}
		var procs []jProc
		if err := json.Unmarshal([]byte(so.String()), &procs); err != nil || len(procs) != 2 {
			t.Fatalf("%s: %v\n%s", hook, err, so.String())
		}
		for _, th := range procs[0].Threads {
			if th.Error == nil || !strings.Contains(*th.Error, "sandboxed parser failed") {
				t.Errorf("%s: service thread %s: error %v", hook, th.Name, th.Error)
			}
			for _, f := range th.Frames {
				if f.Function != nil && f.Kind == "user" {
					t.Errorf("%s: service thread %s named %q without its parser", hook, th.Name, *f.Function)
				}
			}
		}
		checkBlocked(t, procs[1], own.PID)
		// What needs no parsing is still shown: syscalls, kernel frames.
		for _, th := range procs[0].Threads {
			if th.Syscall == nil || th.Syscall.Name == "" || kernelFrames(th) == 0 {
				t.Errorf("%s: service thread %s lost its syscall or kernel frames", hook, th.Name)
			}
		}
	}
}

// The capture's first checks go to the child while it starts. A child
// that never becomes ready (its lockdown fails: test hook, on both tries)
// costs the process its names, said in one line: nothing of it is parsed
// in-process (the test hooks' log of in-process parsings stays empty), its
// threads were stopped for want of an answer to their checks, and what
// needs no parsing (syscalls, kernel frames) is still shown. A child that
// was ready and crashed in those checks did start: the process loses its
// names too.
func TestSandboxNeverReady(t *testing.T) {
	bin := hookedBin(t)
	svc := startService(t)
	for _, hook := range []string{"lockdown", "checkall:crash"} {
		parsed := filepath.Join(t.TempDir(), "inprocess")
		cmd := exec.Command(bin, "dump", "--json", fmt.Sprint(svc.PID))
		cmd.Env = append(os.Environ(), "STACKSHOT_TEST_SANDBOX_HOOK="+hook, "STACKSHOT_SANDBOX=", "STACKSHOT_TEST_INPROCESS_LOG="+parsed)
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", hook, err, se.String())
		}
		var proc jProc
		if err := json.Unmarshal([]byte(so.String()), &proc); err != nil {
			t.Fatalf("%s: %v\n%s", hook, err, so.String())
		}
		if b, err := os.ReadFile(parsed); !os.IsNotExist(err) {
			t.Errorf("%s: parsed in-process: %q (%v)", hook, b, err)
		}
		notStarted := fmt.Sprintf("stackshot: names of process %d lost: the sandboxed parser did not start (test hook: the lockdown fails; --no-sandbox parses it inside stackshot itself)\n", svc.PID)
		lost := fmt.Sprintf("names of process %d lost: the sandboxed parser failed", svc.PID)
		switch hook {
		case "lockdown":
			if se.String() != notStarted {
				t.Errorf("%s: stderr:\n%s\nwant the one line\n%s", hook, se.String(), notStarted)
			}
			// record's sampler gets the same child: the line is said
			// once, not again by the sampler (--idle: its every tick walks
			// the blocked threads in the failed child).
			rec := exec.Command(bin, "record", "--idle", "-d", "1s", "-o", filepath.Join(t.TempDir(), "rec.json"), fmt.Sprint(svc.PID))
			rec.Env = cmd.Env
			out, err := rec.CombinedOutput()
			if n := strings.Count(string(out), "did not start"); err != nil || n != 1 || !strings.Contains(string(out), strings.TrimSuffix(notStarted, "\n")) {
				t.Errorf("%s: record (%v) said the not-started line %d times:\n%s", hook, err, n, out)
			}
			for _, th := range proc.Threads {
				// (a stop would make epoll_wait and rt_sigtimedwait fail
				// with EINTR: those are spared it, checked or not)
				if th.Capture == "nostop" && th.Syscall != nil && th.Syscall.Name != "epoll_wait" && th.Syscall.Name != "rt_sigtimedwait" {
					t.Errorf("%s: thread %s read without a stop: checked without its parser", hook, th.Name)
				}
				if th.Syscall == nil || th.Syscall.Name == "" || kernelFrames(th) == 0 {
					t.Errorf("%s: thread %s lost its syscall or kernel frames", hook, th.Name)
				}
			}
		case "checkall:crash":
			if !strings.Contains(se.String(), lost) || strings.Contains(se.String(), "did not start") {
				t.Errorf("%s: stderr:\n%s", hook, se.String())
			}
		}
		for _, th := range proc.Threads {
			for _, f := range th.Frames {
				if f.Function != nil && f.Kind == "user" {
					t.Errorf("%s: thread %s named %q without its parser", hook, th.Name, *f.Function)
				}
			}
		}
	}
}

// STACKSHOT_SANDBOX=1 puts a process of stackshot's own user in the child
// too, and a failed child there costs that process only its names.
func TestSandboxForced(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	bin := hookedBin(t)
	own := testutil.Start(t, buildBlocked(t, blockedVariants[1].flags))
	cmd := exec.Command(bin, "dump", fmt.Sprint(own.PID))
	cmd.Env = append(os.Environ(), "STACKSHOT_SANDBOX=1", "STACKSHOT_TEST_SANDBOX_HOOK=crash")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("names of process %d lost", own.PID)) {
		t.Fatalf("%v\n%s", err, out)
	}
}

// report parses a capture file (hostile) in the child, decoding
// included: same frames as --no-sandbox; a crash there costs that file,
// said so (exit 1), and nothing of it is parsed in stackshot itself.
func TestSandboxReport(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	own := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	capFile := filepath.Join(t.TempDir(), "c.cap")
	if _, se, code := runSS(t, "capture", fmt.Sprint(own.PID), "-o", capFile); code != 0 {
		t.Fatalf("capture: exit %d\n%s", code, se)
	}
	boxed, se, code := runSS(t, "report", capFile)
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, se)
	}
	plain, _, _ := runSS(t, "report", "--no-sandbox", capFile)
	if boxed != plain || !strings.Contains(boxed, "reader_c") {
		t.Errorf("report in the sandbox:\n%s\n--no-sandbox:\n%s", boxed, plain)
	}
	cmd := exec.Command(hookedBin(t), "report", capFile)
	cmd.Env = append(os.Environ(), "STACKSHOT_TEST_SANDBOX_HOOK=crash")
	var so, serr strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &serr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(serr.String(), capFile+" not shown: the sandboxed parser failed") ||
		strings.Contains(so.String(), "reader_c") {
		t.Errorf("report with a crashing child: %v\n%s\nstderr:\n%s", err, so.String(), serr.String())
	}
}

// BenchmarkDumpSandbox is the whole command on a small process of another
// user (many.c, 1, 128 and 512 blocked threads; and the distribution's stripped
// sleep, whose modules' debug files are looked for and not found), parsed
// in the sandboxed child
// (the default for such a target), plain and with -s -i, the tools
// alternating as in BenchmarkDumpVsEuStack: "stackshot" with the cache
// filled (the child's namespace of it: cron's second run), "stackshot-cold"
// with an empty cache each time, "stackshot-nocache" (--no-cache: what the
// child paid before it had a cache), "no-sandbox" (in-process, warm) and
// eu-stack; STACKSHOT_BASELINE=BIN adds an older build, warm, as
// "baseline". ns/op is the warm sandboxed dump's wall time; TOOL-ms and
// TOOL-cpu-ms the medians.
func BenchmarkDumpSandbox(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the sandbox runs for targets of another user")
	}
	setpriv := testutil.Need(b, "setpriv")
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	eu, euErr := exec.LookPath("eu-stack")
	baseline := os.Getenv("STACKSHOT_BASELINE")
	// stackshot does not wait for its child's exit: the child is then
	// reaped here (a subreaper) and its CPU time counted.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	sleep := testutil.Need(b, "sleep")
	for _, target := range []struct {
		name string
		argv []string
	}{
		{"threads-1", []string{bin, "1"}},
		{"threads-128", []string{bin, "128"}},
		{"threads-512", []string{bin, "512"}},
		{"sleep", []string{"/bin/sh", "-c", "echo ready; exec " + sleep + " 1000000"}},
	} {
		tg := testutil.Start(b, setpriv, append([]string{"--reuid", fmt.Sprint(serviceUID), "--regid", fmt.Sprint(serviceUID), "--clear-groups", "--"}, target.argv...)...)
		pid := fmt.Sprint(tg.PID)
		for _, v := range []struct {
			name  string
			flags []string
		}{{"plain", nil}, {"lines", []string{"-s", "-i"}}} {
			if v.name == "lines" && (target.name == "sleep" || target.name == "threads-512") {
				continue // (no debug information; eu-stack -s -i takes a second)
			}
			b.Run(target.name+"/"+v.name, func(b *testing.B) {
				dir := b.TempDir()
				args := append(append([]string{}, v.flags...), pid)
				tools := []cacheTool{{"stackshot", stackshotBin, args, false}, {"stackshot-cold", stackshotBin, args, true},
					{"stackshot-nocache", stackshotBin, append([]string{"--no-cache"}, args...), false},
					{"no-sandbox", stackshotBin, append([]string{"--no-sandbox"}, args...), false}}
				if euErr == nil {
					tools = append(tools, cacheTool{"eu-stack", eu, append(append([]string{"-n", "0"}, v.flags...), "-p", pid), false})
				}
				if baseline != "" {
					tools = append(tools, cacheTool{"baseline", baseline, args, false})
				}
				for _, tl := range tools { // (fills the warm ones' cache)
					if out, err := tl.command(b, dir).CombinedOutput(); err != nil {
						b.Fatalf("%s %v: %v\n%s", tl.bin, tl.args, err, out)
					}
				}
				wall := make([][]float64, len(tools))
				cpu := make([][]float64, len(tools))
				for i := 0; i < b.N; i++ {
					for k, tl := range tools {
						if k > 0 {
							b.StopTimer()
						}
						cmd := tl.command(b, dir)
						start := time.Now()
						if err := cmd.Run(); err != nil {
							b.Fatalf("%s %v: %v", tl.bin, tl.args, err)
						}
						wall[k] = append(wall[k], float64(time.Since(start).Microseconds())/1000)
						ps := cmd.ProcessState
						cpu[k] = append(cpu[k], float64((ps.UserTime()+ps.SystemTime()+reapChildren(tg.PID)).Microseconds())/1000)
						if k > 0 {
							b.StartTimer()
						}
					}
				}
				for k, tl := range tools {
					b.ReportMetric(median(wall[k]), tl.name+"-ms")
					b.ReportMetric(median(cpu[k]), tl.name+"-cpu-ms")
				}
			})
		}
		tg.Stop()
	}
}

// reapChildren waits for the sandboxed children stackshot left (orphans
// the test process adopted as a subreaper: every child but the target,
// whose own children the tools reaped) and returns their CPU time.
func reapChildren(target int) time.Duration {
	var sum time.Duration
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err != nil || pid == target {
				continue
			}
			var ru unix.Rusage
			var ws unix.WaitStatus
			if _, err := unix.Wait4(pid, &ws, 0, &ru); err == nil {
				sum += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
		}
	}
	return sum
}

// symbolize -p of another user's process names addresses in the child as
// it does in-process, and a crashed child leaves them unnamed, said once.
func TestSandboxSymbolize(t *testing.T) {
	svc := startService(t)
	p := dumpJSON(t, "--no-sandbox", fmt.Sprint(svc.PID))
	var addrs []string
	for _, th := range p.Threads {
		for _, f := range th.Frames {
			if f.Kind == "user" && f.Function != nil {
				addrs = append(addrs, f.PC)
			}
		}
	}
	if len(addrs) < 10 {
		t.Fatalf("only %d named addresses", len(addrs))
	}
	args := append([]string{"symbolize", "-p", fmt.Sprint(svc.PID)}, addrs...)
	boxed, se, code := runSS(t, args...)
	plain, _, _ := runSS(t, append([]string{"symbolize", "--no-sandbox"}, args[1:]...)...)
	if code != 0 || boxed != plain || !strings.Contains(boxed, "reader_c") {
		t.Fatalf("exit %d %s\nsandbox:\n%s\n--no-sandbox:\n%s", code, se, boxed, plain)
	}
	cmd := exec.Command(hookedBin(t), args...)
	cmd.Env = append(os.Environ(), "STACKSHOT_TEST_SANDBOX_HOOK=crash")
	var so, serr strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &serr
	cmd.Run()
	if strings.Contains(so.String(), "reader_c") || strings.Count(serr.String(), "sandboxed parser failed") != 1 {
		t.Errorf("symbolize with a crashing child:\n%s\nstderr:\n%s", so.String(), serr.String())
	}
}

// boxedAndNot runs dump --json of pid with the sandboxed child forced on
// (STACKSHOT_SANDBOX=1) and off (=0).
func boxedAndNot(t *testing.T, pid int, out any, plain any) {
	t.Helper()
	for i, on := range []string{"1", "0"} {
		so, se, code := runEnv(t, []string{"STACKSHOT_SANDBOX=" + on}, "dump", "--json", fmt.Sprint(pid))
		if code != 0 {
			t.Fatalf("STACKSHOT_SANDBOX=%s: exit %d\n%s", on, code, se)
		}
		if err := json.Unmarshal([]byte(so), []any{out, plain}[i]); err != nil {
			t.Fatalf("STACKSHOT_SANDBOX=%s: %v\n%s", on, err, so)
		}
	}
}

// goroutineView keys each waiting goroutine by id: its wait, creator and
// frames (running ones may move between two dumps).
func goroutineView(p jGoProc) map[uint64]string {
	out := map[uint64]string{}
	if p.Goroutines == nil {
		return out
	}
	for _, g := range *p.Goroutines {
		if g.Status != "waiting" {
			continue
		}
		var fs []string
		for _, f := range g.Frames {
			fs = append(fs, fmt.Sprintf("%s %s:%d", f.Fn(), f.File, f.Line))
		}
		cb := ""
		if g.CreatedBy != nil {
			cb = fmt.Sprintf("%s:%d", g.CreatedBy.Function, g.CreatedBy.Line)
		}
		wr := ""
		if g.WaitReason != nil {
			wr = *g.WaitReason
		}
		out[g.GoID] = fmt.Sprintf("%s by %s: %s", wr, cb, strings.Join(fs, " <- "))
	}
	return out
}

// A Go program's goroutines read in the sandboxed child are those read
// in-process: same runtime, ids, waits, creators, frames and lines. With
// the child crashing when it reads them (test hook), the goroutines are
// lost and said so while the threads keep their names: the child is what
// reads them.
func TestSandboxGoroutinesSame(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	have, _ := testutil.GoToolchains()
	bin := testutil.BuildGo(t, have[0], testutil.Testdata("goruntime", "goroutines"), []string{"CGO_ENABLED=0"})
	tg := testutil.Start(t, bin, "-park", "30")
	var boxed, plain jGoProc
	boxedAndNot(t, tg.PID, &boxed, &plain)
	if boxed.Runtime == nil || plain.Runtime == nil || *boxed.Runtime != *plain.Runtime {
		t.Fatalf("runtime: sandbox %+v, in-process %+v (warnings %q)", boxed.Runtime, plain.Runtime, boxed.Warnings)
	}
	b, p := goroutineView(boxed), goroutineView(plain)
	if len(p) < 30 || len(b) != len(p) {
		t.Errorf("waiting goroutines: sandbox %d, in-process %d (want >= 30)", len(b), len(p))
	}
	for id, want := range p {
		if b[id] != want {
			t.Errorf("goroutine %d:\n sandbox     %s\n in-process  %s", id, b[id], want)
		}
	}
	so, se, code := runBinEnv(t, hookedBin(t), []string{"STACKSHOT_SANDBOX=1", "STACKSHOT_TEST_SANDBOX_HOOK=go:crash"}, "dump", "--json", fmt.Sprint(tg.PID))
	var lost jGoProc
	if code != 0 || json.Unmarshal([]byte(so), &lost) != nil {
		t.Fatalf("with go:crash: exit %d\n%s", code, se)
	}
	if lost.Goroutines != nil || !strings.Contains(strings.Join(lost.Warnings, "\n"), "goroutines not read: the sandboxed parser failed") ||
		!strings.Contains(so, "runtime.") {
		t.Errorf("with go:crash: goroutines %v, warnings %q; want none, said so, threads named", lost.Goroutines != nil, lost.Warnings)
	}
}

// Lock owners and deadlocks found in the sandboxed child (the lock words
// read and checked there) are those found in-process; with the child
// crashing then (test hook), the owners are unknown and said so.
func TestSandboxLocksSame(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	bin := buildLocks(t)
	view := func(p jProc) string {
		var parts []string
		for _, th := range p.Threads {
			if w := th.WaitingFor; w != nil {
				owner, addr := -1, ""
				if w.OwnerTID != nil {
					owner = *w.OwnerTID
				}
				if w.Address != nil {
					addr = *w.Address
				}
				parts = append(parts, fmt.Sprintf("%d:%s@%s owner %d (%s)", th.TID, w.Kind, addr, owner, w.Note))
			}
		}
		if p.Deadlocks != nil {
			for _, d := range *p.Deadlocks {
				var addrs []string
				for _, a := range d.Addresses {
					if a != nil {
						addrs = append(addrs, *a)
					} else {
						addrs = append(addrs, "?")
					}
				}
				parts = append(parts, fmt.Sprintf("deadlock %v at %v", d.TIDs, addrs))
			}
		}
		return strings.Join(parts, "\n") + "\nverdict " + p.Verdict
	}
	for _, sc := range [][]string{{"deadlock", "normal"}, {"deadlock", "pi"}, {"cycle3"}, {"rwlock"}} {
		t.Run(strings.Join(sc, "-"), func(t *testing.T) {
			tg := testutil.Start(t, bin, sc...)
			var boxed, plain jProc
			boxedAndNot(t, tg.PID, &boxed, &plain)
			b, p := view(boxed), view(plain)
			if b != p || !strings.Contains(p, "owner") || strings.Count(p, "owner -1") == strings.Count(p, "owner") {
				t.Errorf("sandbox:\n%s\nin-process:\n%s", b, p)
			}
		})
	}
	tg := testutil.Start(t, bin, "deadlock", "normal")
	so, se, code := runBinEnv(t, hookedBin(t), []string{"STACKSHOT_SANDBOX=1", "STACKSHOT_TEST_SANDBOX_HOOK=locks:crash"}, "dump", "--json", fmt.Sprint(tg.PID))
	var lost jProc
	if code != 0 || json.Unmarshal([]byte(so), &lost) != nil {
		t.Fatalf("with locks:crash: exit %d\n%s", code, se)
	}
	if strings.Contains(view(lost), "owner") || !strings.Contains(strings.Join(lost.Warnings, "\n"), "lock owners not found: the sandboxed parser failed") {
		t.Errorf("with locks:crash:\n%s\nwarnings %q", view(lost), lost.Warnings)
	}
}

// report reads an ELF core in the sandboxed child: the same report as
// --no-sandbox, --tid too; a crash there costs that core (said, exit 1),
// and each file given has its own child.
func TestSandboxReportCore(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	dir := t.TempDir()
	core, capFile := filepath.Join(dir, "t.core"), filepath.Join(dir, "t.cap")
	for _, out := range []string{core, capFile} {
		if _, se, code := runSS(t, "capture", fmt.Sprint(tg.PID), "-o", out); code != 0 {
			t.Fatalf("capture %s: exit %d\n%s", out, code, se)
		}
	}
	tid := tidByName(t, tg.PID, "reader")
	for _, args := range [][]string{{core}, {"--tid", fmt.Sprint(tid), core}} {
		boxed, se, code := runSS(t, append([]string{"report"}, args...)...)
		if code != 0 {
			t.Fatalf("report %v: exit %d\n%s", args, code, se)
		}
		plain, _, _ := runSS(t, append([]string{"report", "--no-sandbox"}, args...)...)
		if boxed != plain || !strings.Contains(boxed, "reader_c") {
			t.Errorf("report %v in the sandbox:\n%s\n--no-sandbox:\n%s", args, boxed, plain)
		}
	}
	so, se, code := runBinEnv(t, hookedBin(t), []string{"STACKSHOT_TEST_SANDBOX_HOOK=saved:crash"}, "report", core, capFile)
	if code != 1 || !strings.Contains(se, core+" not shown: the sandboxed parser failed") ||
		!strings.Contains(se, capFile+" not shown: the sandboxed parser failed") || strings.Contains(so, "reader_c") {
		t.Errorf("report with the children crashing: exit %d\n%s\nstderr:\n%s", code, so, se)
	}
}

// A process parsed in the sandboxed child (which has no network) gets its
// debug file from debuginfod all the same: the parent fetches it when the
// child asks, by build id, and hands it over. Names and lines arrive, the
// file lands in the cache, nothing is said on stderr.
func TestSandboxDebuginfod(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	sp := testutil.SplitTarget(t, "blocked", false)
	srv := testutil.StartDebuginfod(t, []string{sp.Debug}, "/buildid/"+sp.BuildID+"/debuginfo")
	tg := testutil.Start(t, sp.Exe)
	cache := filepath.Join(t.TempDir(), "cache")
	p, errOut := dumpEnv(t, append(debugEnv(cache, srv.URL), "STACKSHOT_SANDBOX=1"), fmt.Sprint(tg.PID))
	wantReaderLines(t, p, filepath.Base(sp.Exe))
	if errOut != "" {
		t.Errorf("stderr %q", errOut)
	}
	if files, want := testutil.CacheFiles(t, cache), []string{sp.BuildID + "/debuginfo 0400"}; !slices.Equal(files, want) {
		t.Errorf("cache %v, want %v", files, want)
	}
}
