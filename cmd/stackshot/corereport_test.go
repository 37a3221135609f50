//go:build linux

package main

// report on cores stackshot did not write: gdb's gcore of a running
// target, the kernel's core of a program that aborted; and a core whose
// executable is gone.

import (
	"encoding/json"
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

// TestReportGcore: gdb's gcore of the blocked target, reported: the same
// chains as a live dump.
func TestReportGcore(t *testing.T) {
	testutil.Need(t, "gcore")
	exe := buildBlocked(t, blockedVariants[1].flags)
	tg := testutil.Start(t, exe)
	prefix := filepath.Join(t.TempDir(), "g")
	if out, err := exec.Command("gcore", "-o", prefix, strconv.Itoa(tg.PID)).CombinedOutput(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, out)
	}
	tg.Stop()
	core := fmt.Sprintf("%s.%d", prefix, tg.PID)
	p := reportCore(t, core)
	if p.PID != tg.PID || len(p.Threads) != 7 {
		t.Fatalf("pid %d, %d threads; want %d, 7", p.PID, len(p.Threads), tg.PID)
	}
	// gcore writes the state the process had under gdb: t, tracing stop.
	// Its threads carry none: the text says so rather than leave a gap.
	if p.State != "t" {
		t.Errorf("process state %q, want gcore's t", p.State)
	}
	out, errOut, code := runSS(t, "report", core)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	// (Its threads' system calls come from their registers.)
	if !strings.Contains(out, " threads, state t\n") || !strings.Contains(out, ` (state ?, in read, from a core):`) {
		t.Errorf("text report does not show the states:\n%s", out)
	}
	if p.Threads[0].TID != tg.PID {
		t.Errorf("first thread %d, want the main thread", p.Threads[0].TID)
	}
	assertMainChain(t, p.Threads[0], "main_wait", "main")
	for _, chain := range [][]string{
		{"reader_c", "reader_b", "reader_a", "start"},
		{"cond_c", "cond_b", "cond_a", "start"},
		{"sleep_c", "sleep_b", "sleep_a", "start"},
		{"epoll_c", "epoll_b", "epoll_a", "start"},
		{"recv_c", "recv_b", "recv_a", "start"},
		{"sigw_c", "sigw_b", "sigw_a", "start"},
	} {
		th := mustThreadWith(t, p, chain[0])
		assertThreadChain(t, th, chain...)
		if th.Capture != "core" || th.Error != nil {
			t.Errorf("%s: capture %q error %v", chain[0], th.Capture, th.Error)
		}
	}
}

// kernelCorePath says where the kernel writes the core of a process run in
// dir, or why this test cannot know.
func kernelCorePath(dir string, pid int) (string, string) {
	b, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil {
		return "", "cannot read /proc/sys/kernel/core_pattern"
	}
	pat := strings.TrimSpace(string(b))
	switch {
	case strings.HasPrefix(pat, "|"):
		return "", fmt.Sprintf("core_pattern pipes cores to %q, not to a file", pat)
	case strings.Contains(pat, "/") || strings.Contains(strings.ReplaceAll(pat, "%p", ""), "%"):
		return "", fmt.Sprintf("core_pattern %q names cores this test does not predict", pat)
	}
	name := strings.ReplaceAll(pat, "%p", strconv.Itoa(pid))
	if u, _ := os.ReadFile("/proc/sys/kernel/core_uses_pid"); strings.TrimSpace(string(u)) == "1" && !strings.Contains(pat, "%p") {
		name += "." + strconv.Itoa(pid)
	}
	return filepath.Join(dir, name), ""
}

// abortedCore runs testdata's aborter with RLIMIT_CORE raised until it
// calls abort(), and returns the kernel's core of it (removed when the
// test ends) and its pid; it skips where the kernel writes no core here.
func abortedCore(t *testing.T) (path string, pid int) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CORE, &lim); err != nil || lim.Max != ^uint64(0) && lim.Max < 64<<20 {
		testutil.Skip(t, fmt.Sprintf("the hard RLIMIT_CORE (%d) does not allow a core", lim.Max))
	}
	dir := t.TempDir()
	if _, why := kernelCorePath(dir, 1); why != "" {
		testutil.Skip(t, why)
	}
	exe := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "aborter.c")}, "-O1", "-g", "-pthread")
	tg := testutil.Start(t, "/bin/sh", "-c", "ulimit -c unlimited && cd "+dir+" && exec "+exe)
	if ans := tg.Ask("abort"); ans != "aborting" {
		t.Fatalf("target said %q", ans)
	}
	tg.Cmd.Wait()
	ws, ok := tg.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.CoreDump() || ws.Signal() != syscall.SIGABRT {
		t.Fatalf("target ended with %v, want SIGABRT and a core dump", tg.Cmd.ProcessState)
	}
	path, _ = kernelCorePath(dir, tg.PID)
	t.Cleanup(func() { os.Remove(path) })
	return path, tg.PID
}

// TestReportKernelCore: a program aborts with RLIMIT_CORE raised; the
// kernel's core, reported, shows the abort's chain and the other thread.
func TestReportKernelCore(t *testing.T) {
	path, pid := abortedCore(t)
	p := reportCore(t, path)
	if p.PID != pid || len(p.Threads) != 2 {
		t.Fatalf("pid %d, %d threads; want %d, 2", p.PID, len(p.Threads), pid)
	}
	main := p.Threads[0]
	if main.TID != pid {
		t.Errorf("first thread %d, want the one that aborted", main.TID)
	}
	if f := fnames(main); !hasSubseq(f, []string{"__GI_abort", "crash_b", "crash_a", "main"}) && !hasSubseq(f, []string{"abort", "crash_b", "crash_a", "main"}) {
		t.Errorf("aborting thread: want abort, crash_b, crash_a, main in %v", f)
	}
	assertThreadChain(t, mustThreadWith(t, p, "wait_b"), "wait_b", "wait_a", "start")
}

// TestReportCoreMissingBinary: the executable is gone when the core is
// reported: the report says so once, by path and build id, and marks its
// frames instead of guessing past them.
func TestReportCoreMissingBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "victim")
	copyFile(t, buildBlocked(t, blockedVariants[1].flags), exe)
	tg := testutil.Start(t, exe)
	core := captureCore(t, tg)
	os.Remove(exe)
	out, errOut, code := runSS(t, "report", "--json", core)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	p := reportCoreJSON(t, out)
	n := 0
	for _, w := range p.Warnings {
		if strings.Contains(w, exe) {
			n++
			if !strings.Contains(w, "not found") || !strings.Contains(w, "build id ") || strings.Contains(w, "build id unknown") {
				t.Errorf("warning %q: want the path, the build id and 'not found'", w)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d warnings name %s, want 1: %q", n, exe, p.Warnings)
	}
	marked := 0
	for _, th := range p.Threads {
		for i, f := range th.Frames {
			if f.Module != exe {
				continue
			}
			if !f.ModuleMissing || f.Function != nil || f.BuildID == "" {
				t.Errorf("thread %q: frame in the missing module: %+v", th.Name, f)
			}
			marked++
			// Nothing guessed past it: it is the last frame.
			if i != len(th.Frames)-1 {
				t.Errorf("thread %q: %d frames after the first frame in the missing module", th.Name, len(th.Frames)-1-i)
			}
			break
		}
	}
	if marked != 7 {
		t.Errorf("%d threads reach the missing module, want 7", marked)
	}
}

type missingReport struct {
	Warnings []string `json:"warnings"`
	Threads  []struct {
		Name   string `json:"name"`
		Frames []struct {
			Module        string  `json:"module"`
			Function      *string `json:"function"`
			BuildID       string  `json:"build_id"`
			ModuleMissing bool    `json:"module_missing"`
		} `json:"frames"`
	} `json:"threads"`
}

func reportCoreJSON(t testing.TB, out string) missingReport {
	t.Helper()
	var p missingReport
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	return p
}

// TestReportKernelFramesCarryAddresses: kernel frames in a report of a
// saved capture (capture file or core) carry the addresses known at
// capture time, as the live dump's do, not 0x0.
func TestReportKernelFramesCarryAddresses(t *testing.T) {
	ks, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		testutil.Skip(t, "no /proc/kallsyms")
	}
	kaddr := map[string]uint64{}
	for _, l := range strings.Split(string(ks), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			v, _ := strconv.ParseUint(f[0], 16, 64)
			kaddr[f[2]] = v
		}
	}
	if kaddr["_stext"] == 0 {
		testutil.Skip(t, "/proc/kallsyms hides addresses (kptr_restrict)")
	}
	exe := buildBlocked(t, blockedVariants[1].flags)
	for _, name := range []string{"t.cap", "t.core"} {
		t.Run(name, func(t *testing.T) {
			tg := testutil.Start(t, exe)
			file := filepath.Join(t.TempDir(), name)
			if _, errOut, code := runSS(t, "capture", strconv.Itoa(tg.PID), "-o", file); code != 0 {
				t.Fatalf("capture: exit %d: %s", code, errOut)
			}
			tg.Stop()
			p := reportCore(t, file)
			checked := 0
			for _, th := range p.Threads {
				for _, f := range th.Frames {
					if f.Kind != "kernel" {
						continue
					}
					if f.PC == "0x0" {
						t.Errorf("thread %q: kernel frame %s with pc 0x0", th.Name, f.Fn())
						continue
					}
					if a, ok := kaddr[f.Fn()]; ok && f.Offset != nil {
						if want := fmt.Sprintf("%#x", a+*f.Offset); f.PC != want {
							t.Errorf("kernel frame %s+%#x: pc %s, kallsyms gives %s", f.Fn(), *f.Offset, f.PC, want)
						}
						checked++
					}
				}
			}
			if checked < 7 {
				t.Errorf("only %d kernel frames checked", checked)
			}
		})
	}
}

// TestReportCoreSysroot: the core is reported where its files live under
// another root (a laptop holding a copy of the production host's files):
// --sysroot finds them there, checked by build id, so another build at
// that path is a mismatch, not a source of names.
func TestReportCoreSysroot(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "app", "victim")
	os.MkdirAll(filepath.Dir(exe), 0o755)
	orig := buildBlocked(t, blockedVariants[1].flags)
	copyFile(t, orig, exe)
	tg := testutil.Start(t, exe)
	core := captureCore(t, tg)
	root := filepath.Join(dir, "sysroot")
	os.MkdirAll(filepath.Join(root, filepath.Dir(exe)), 0o755)
	os.Rename(exe, filepath.Join(root, exe))

	p := reportCore(t, "--sysroot", root, core)
	assertThreadChain(t, threadByName(t, p, "reader"), "reader_c", "reader_b", "reader_a", "start")
	for _, w := range p.Warnings {
		if strings.Contains(w, "not found") {
			t.Errorf("warning %q with the file under --sysroot", w)
		}
	}

	copyFile(t, testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O1", "-g", "-pthread"), filepath.Join(root, exe))
	p = reportCore(t, "--sysroot", root, core)
	for _, f := range threadByName(t, p, "reader").Frames {
		if f.Module == exe && (!f.BuildIDMismatch || f.Function != nil) {
			t.Errorf("another build under --sysroot: frame %+v, want a mismatch without a name", f)
		}
	}
}
