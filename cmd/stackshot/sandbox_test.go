//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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

// report parses a capture (hostile) in the child: same frames as
// --no-sandbox, and a crash there costs the names, not the report.
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
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, serr.String())
	}
	if !strings.Contains(serr.String(), "sandboxed parser failed") || strings.Contains(so.String(), "reader_c") ||
		!strings.Contains(so.String(), fmt.Sprintf("Process %d (", own.PID)) {
		t.Errorf("report with a crashing child:\n%s\nstderr:\n%s", so.String(), serr.String())
	}
}

// BenchmarkDumpSandbox is the whole command, cold (a new stackshot each
// time), on a small process of another user (many.c, 1 and 128 blocked
// threads): through the sandboxed child (the default for such a target)
// and with --no-sandbox. ns/op is the wall time of one dump.
func BenchmarkDumpSandbox(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the sandbox runs for targets of another user")
	}
	setpriv := testutil.Need(b, "setpriv")
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	for _, n := range []int{1, 128} {
		tg := testutil.Start(b, setpriv, "--reuid", fmt.Sprint(serviceUID), "--regid", fmt.Sprint(serviceUID), "--clear-groups", "--", bin, fmt.Sprint(n))
		for _, format := range []string{"text", "json"} {
			for _, box := range []string{"sandbox", "no-sandbox"} {
				b.Run(fmt.Sprintf("threads-%d/%s/%s", n, format, box), func(b *testing.B) {
					args := []string{"dump", "--format", format}
					if box == "no-sandbox" {
						args = append(args, "--no-sandbox")
					}
					args = append(args, fmt.Sprint(tg.PID))
					for b.Loop() {
						if out, err := exec.Command(stackshotBin, args...).CombinedOutput(); err != nil {
							b.Fatalf("%v\n%s", err, out)
						}
					}
				})
			}
		}
		tg.Stop()
	}
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
