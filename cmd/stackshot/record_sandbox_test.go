//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/perfsample"
)

// startBusyService starts blocked.c's five busy threads as serviceUID:
// another user's process, which record unwinds and names in the
// sandboxed child.
func startBusyService(t *testing.T) *testutil.Target {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the sandbox runs for targets of another user")
	}
	setpriv := testutil.Need(t, "setpriv")
	bin := buildBlocked(t, blockedVariants[1].flags)
	return testutil.Start(t, setpriv, "--reuid", fmt.Sprint(serviceUID), "--regid", fmt.Sprint(serviceUID), "--clear-groups", "--",
		bin, "spin", "busy")
}

// busyChains are the chains record gives blocked.c's busy threads.
func busyChains() map[string]string {
	want := map[string]string{"spinner": "__clone3;start_thread;start;spin_a;spin_b;spin_c"}
	for k := range 4 {
		want[fmt.Sprintf("busy-%d", k)] = fmt.Sprintf("__clone3;start_thread;start;busy%d_a;busy%d_b", k, k)
	}
	return want
}

// record of another user's process unwinds and names in the sandboxed
// child (the default, forced here too) the chains it gives in-process
// (--no-sandbox), with perf events and with ptrace stops.
func TestRecordSandboxSameChains(t *testing.T) {
	tg := startBusyService(t)
	samplers := []string{"ptrace"}
	if perfsample.Probe(perfsample.Config{Freq: 99}) == nil {
		samplers = append(samplers, "perf")
	}
	for _, smp := range samplers {
		got := map[string]map[string]map[string]int{}
		for _, box := range []string{"sandbox", "no-sandbox"} {
			out := filepath.Join(t.TempDir(), "p.folded")
			args := []string{"record", "-F", "99", "-d", "1s", "--per-thread", "--sampler", smp, "-o", out}
			if box == "no-sandbox" {
				args = append(args, "--no-sandbox")
			}
			cmd := exec.Command(stackshotBin, append(args, fmt.Sprint(tg.PID))...)
			cmd.Env = append(os.Environ(), "STACKSHOT_SANDBOX=")
			if box == "sandbox" {
				cmd.Env = append(cmd.Env, "STACKSHOT_SANDBOX=1")
			}
			if errOut, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s %s: %v\n%s", smp, box, err, errOut)
			} else if strings.Contains(string(errOut), "is parsed inside stackshot itself") || strings.Contains(string(errOut), "lost") {
				t.Errorf("%s %s: %s", smp, box, errOut)
			}
			got[box] = perThreadChains(t, out)
		}
		for name, chain := range busyChains() {
			for box, ch := range got {
				if len(ch[name]) != 1 || ch[name][chain] == 0 {
					t.Errorf("%s %s: thread %s has stacks %v, want only %q", smp, box, name, ch[name], chain)
				}
			}
		}
	}
}

// A crash of the child while it unwinds record's ticks (test hook) costs
// the names, said on stderr; the recording goes on and ends, and its
// profile holds each sample's raw address.
func TestRecordSandboxCrash(t *testing.T) {
	tg := startBusyService(t)
	out := filepath.Join(t.TempDir(), "p.folded")
	cmd := exec.Command(hookedBin(t), "record", "-F", "99", "-d", "1s", "--per-thread", "--sampler", "ptrace", "-o", out, fmt.Sprint(tg.PID))
	cmd.Env = append(os.Environ(), "STACKSHOT_TEST_SANDBOX_HOOK=record:crash", "STACKSHOT_SANDBOX=")
	errOut, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if want := fmt.Sprintf("names of process %d lost: the sandboxed parser failed", tg.PID); strings.Count(string(errOut), want) != 1 {
		t.Errorf("stderr does not say %q once:\n%s", want, errOut)
	}
	ch := perThreadChains(t, out)
	raw := regexp.MustCompile(`^blocked\+0x[0-9a-f]+$`) // (the busy functions are the executable's)
	for name := range busyChains() {
		if len(ch[name]) == 0 {
			t.Errorf("thread %s: no sample", name)
		}
		for chain := range ch[name] {
			if !raw.MatchString(chain) {
				t.Errorf("thread %s: stack %q, want its raw address alone", name, chain)
			}
		}
	}
}
