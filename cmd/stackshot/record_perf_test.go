//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/perfsample"
)

// perThreadChains reads a --per-thread folded profile: each thread's
// stacks (root first, the process and thread names left out) and counts.
// A sample with no frames is left out: a running thread that did not stop
// within the stop wait (on a loaded machine, one whose CPU went to other
// work) is counted with no stack, which says nothing of its chain; a
// thread with only such samples has none, and fails where one is wanted.
func perThreadChains(t *testing.T, path string) map[string]map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad folded line %q", line)
		}
		fr := strings.Split(line[:i], ";")
		if len(fr) < 2 {
			t.Fatalf("bad folded line %q", line)
		}
		var n int
		fmt.Sscan(line[i+1:], &n)
		if len(fr) == 2 {
			continue
		}
		if out[fr[1]] == nil {
			out[fr[1]] = map[string]int{}
		}
		out[fr[1]][strings.Join(fr[2:], ";")] += n
	}
	return out
}

// record -F 99 of five busy threads on a smaller machine: every busy
// thread's profile is its exact chain, with both unwinding methods (frame
// pointers, CFI only); by default the samples come from perf events and no
// thread is stopped (blocked calls that count EINTR saw none); forced to
// ptrace, the same chains come from stops.
func TestRecordPerfEventsNoStop(t *testing.T) {
	perfOK := perfsample.Probe(perfsample.Config{Freq: 99}) == nil
	for _, v := range blockedVariants {
		t.Run(v.name, func(t *testing.T) {
			tg := testutil.Start(t, buildBlocked(t, v.flags), "spin", "busy")
			for _, sampler := range []string{"auto", "ptrace"} {
				out := filepath.Join(t.TempDir(), "p.folded")
				_, errOut, code := runSS(t, "record", "-v", "-F", "99", "-d", "2s", "--per-thread", "--sampler", sampler, "-o", out, fmt.Sprint(tg.PID))
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", sampler, code, errOut)
				}
				ch := perThreadChains(t, out)
				want := map[string]string{"spinner": "__clone3;start_thread;start;spin_a;spin_b;spin_c"}
				for k := range 4 {
					want[fmt.Sprintf("busy-%d", k)] = fmt.Sprintf("__clone3;start_thread;start;busy%d_a;busy%d_b", k, k)
				}
				for name, chain := range want {
					if len(ch[name]) != 1 || ch[name][chain] == 0 {
						t.Errorf("%s: thread %s has stacks %v, want only %q", sampler, name, ch[name], chain)
					}
				}
				if len(ch) != len(want) {
					t.Errorf("%s: threads sampled %v, want the five busy ones", sampler, ch)
				}
				switch {
				case sampler == "auto" && perfOK:
					if !strings.Contains(errOut, "stackshot: sampled with perf events: ") || !strings.Contains(errOut, " 0 stopped (") {
						t.Errorf("summary does not say perf events and no stop:\n%s", errOut)
					}
					if got := tg.Ask("s"); got != "eintr read=0 cond=0 sleep=0 epoll=0 recv=0 sigwait=0" {
						t.Errorf("target says %q: a blocked call was interrupted", got)
					}
				case sampler == "auto":
					if !strings.Contains(errOut, "stackshot: sampled with ptrace stops (perf events refused: ") {
						t.Errorf("summary does not say why perf events were not used:\n%s", errOut)
					}
				default:
					if !strings.Contains(errOut, "stackshot: sampled with ptrace stops (asked for)") || strings.Contains(errOut, " 0 stopped (") {
						t.Errorf("summary does not say ptrace stops:\n%s", errOut)
					}
				}
			}
		})
	}
}

// --sampler perf with stops asked for is bad usage; a bad --sampler too.
func TestRecordSamplerUsage(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	for _, args := range [][]string{{"--sampler", "perf", "--mode", "stop"}, {"--sampler", "perf", "--consistent"}, {"--sampler", "ebpf"}} {
		_, errOut, code := runSS(t, append(append([]string{"record", "-d", "1s"}, args...), fmt.Sprint(tg.PID))...)
		if code != 2 || !strings.HasPrefix(errOut, "stackshot: --sampler ") {
			t.Errorf("%v: exit %d, %q; want 2 and a --sampler usage error", args, code, errOut)
		}
	}
}

// Run as another user, under the machine's kernel.perf_event_paranoid:
// at 2, perf events sample user code only, and the summary says so; at 3
// and above (Debian's default), they are refused and record falls back to
// ptrace stops, saying why; below 2, nothing is refused. The chains are
// the same in every case.
func TestRecordPerfAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the target and stackshot run as another user")
	}
	setpriv := testutil.Need(t, "setpriv")
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		testutil.Skip(t, "no perf events here: "+err.Error())
	}
	paranoid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// stackshot where the other user may run it.
	dir, err := os.MkdirTemp("", "stackshot-perfuser")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "stackshot")
	data, err := os.ReadFile(stackshotBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil || os.Chmod(dir, 0o755) != nil {
		t.Fatal(err)
	}
	as := []string{"--reuid", fmt.Sprint(serviceUID), "--regid", fmt.Sprint(serviceUID), "--clear-groups", "--"}
	tg := testutil.Start(t, setpriv, append(as, buildBlocked(t, blockedVariants[1].flags), "busy")...)
	// (the target's pid is setpriv's: it execs)
	cmd := exec.Command(setpriv, append(as, bin, "record", "-v", "-F", "99", "-d", "2s", "--per-thread", "-o", "-", "--format", "folded", fmt.Sprint(tg.PID))...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("record as uid %d: %v\n%s", serviceUID, err, se.String())
	}
	path := filepath.Join(t.TempDir(), "p.folded")
	if err := os.WriteFile(path, so.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ch := perThreadChains(t, path)
	for k := range 4 {
		name, chain := fmt.Sprintf("busy-%d", k), fmt.Sprintf("__clone3;start_thread;start;busy%d_a;busy%d_b", k, k)
		if len(ch[name]) != 1 || ch[name][chain] == 0 {
			t.Errorf("thread %s has stacks %v, want only %q", name, ch[name], chain)
		}
	}
	summary := se.String()
	want := map[bool]string{
		paranoid <= 1: "stackshot: sampled with perf events: ",
		paranoid == 2: "stackshot: perf events: kernel profiling refused: a thread is sampled only while it runs user code",
		paranoid >= 3: "stackshot: sampled with ptrace stops (perf events refused: perf_event_open: permission denied (kernel.perf_event_paranoid is " + strconv.Itoa(paranoid),
	}[true]
	if !strings.Contains(summary, want) {
		t.Errorf("perf_event_paranoid %d: summary lacks %q:\n%s", paranoid, want, summary)
	}
	t.Logf("perf_event_paranoid %d:\n%s", paranoid, summary)
}
