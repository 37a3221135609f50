//go:build linux

package main

// Real-world tests: Go programs (plain, stripped, PIE, cgo), checked
// against go tool addr2line and against a stop-mode capture.

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

var goRoots = map[string]bool{
	"runtime.goexit": true, "runtime.mstart": true, "runtime.mcall": true, "runtime.morestack": true,
	"runtime.rt0_go": true, "runtime.systemstack": true, "runtime.clone": true, "__clone3": true, "clone3": true, "clone": true,
	// runtime/cgo's assembly entry from a pthread into Go: its CFI marks
	// the return address undefined (gdb goes on into garbage past it).
	"crosscall1": true,
}

// TestRealGo dumps a Go program built plain and with -ldflags='-s -w'
// (names then come only from .gopclntab): the main goroutine's chain, the
// spinning goroutine's, and every thread ends at a runtime root.
func TestRealGo(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
	}{{"plain", nil}, {"stripped", []string{"-ldflags=-s -w"}}} {
		t.Run(v.name, func(t *testing.T) {
			bin := buildGoTarget(t, "gotarget", v.flags...)
			tg := testutil.Start(t, bin, "spin")
			// The spinning goroutine is on a thread in most dumps; on a
			// loaded machine some catch it between threads (preempted by
			// the runtime, its next thread not yet running it): then it
			// is in the goroutine list, running or runnable. Dump until
			// it was on a thread once (its chain is what is checked), 5
			// dumps at least, 60 at most. (A generous --timeout: the names
			// are checked, not the speed; at a load of 40 on 2 cores the
			// default 10s cut symbolization short.)
			spinSeen := false
			for round := 0; round < 5 || (!spinSeen && round < 60); round++ {
				out, errOut, code := runSS(t, "dump", "--json", "--timeout", "120s", strconv.Itoa(tg.PID))
				var p jProc
				var gs struct {
					Goroutines []struct {
						Status string   `json:"status"`
						Frames []jFrame `json:"frames"`
					} `json:"goroutines"`
				}
				if code != 0 || json.Unmarshal([]byte(out), &p) != nil || json.Unmarshal([]byte(out), &gs) != nil {
					t.Fatalf("dump: exit %d, %s\n%s", code, errOut, out)
				}
				m := mustThreadWith(t, p, "main.stdinB")
				if f := fnames(m); !hasChain(f, []string{"main.stdinB", "main.stdinA", "main.main", "runtime.main", "runtime.goexit"}) {
					t.Errorf("main goroutine: want main.stdinB, main.stdinA, main.main, runtime.main, runtime.goexit in %v", f)
				}
				if m.Syscall == nil || m.Syscall.Name != "read" {
					t.Errorf("main goroutine's thread: syscall %+v, want read", m.Syscall)
				}
				if th, ok := threadWith(p, "main.spinB"); ok {
					spinSeen = true
					// Caught inside the runtime's preemption signal handler
					// (rare: a loaded machine), the walk goes through the
					// signal frame into the goroutine (TestGoWalkThroughSigtramp);
					// this chain is asserted on rounds outside the handler.
					if f := fnames(th); hasChain(f, []string{"runtime.sigtramp"}) {
						t.Logf("round %d: the spinning thread was in the signal handler: %v", round, f)
					} else if !hasChain(f, []string{"main.spinB", "main.spinA", "runtime.goexit"}) {
						t.Errorf("spinning goroutine: want main.spinB, main.spinA, runtime.goexit in %v", f)
					}
				} else {
					between := false
					for _, g := range gs.Goroutines {
						between = between || g.Status == "runnable" || g.Status == "running" ||
							hasChain(fnames(jThread{Frames: g.Frames}), []string{"main.spinB"})
					}
					if !between {
						t.Errorf("round %d: the spinning goroutine is on no thread and not runnable either: %+v", round, gs.Goroutines)
					}
				}
			}
			if !spinSeen {
				t.Errorf("the spinning goroutine main.spinB was on no thread in 60 dumps")
			}
			assertUntouched(t, tg.PID, false)
		})
	}
}

// TestRealGoThreadsEndAtRoot: every thread of a Go program unwinds to one
// of the runtime's stack roots (runtime.goexit for goroutines; mstart,
// mcall, clone, rt0_go for the scheduler's g0 stacks) and carries no error:
// those stacks are complete, so "stack incomplete" would be a false alarm.
func TestRealGoThreadsEndAtRoot(t *testing.T) {
	for _, v := range []struct {
		name  string
		dir   string
		flags []string
	}{{"plain", "gotarget", nil}, {"cgo", "cgotarget", nil}} {
		t.Run(v.name, func(t *testing.T) {
			tg := testutil.Start(t, buildGoTarget(t, v.dir, v.flags...), "spin")
			bad := map[string]int{}
			for round := 0; round < 5; round++ {
				p := dumpJSON(t, "--mode", "stop", strconv.Itoa(tg.PID))
				for _, th := range p.Threads {
					f := fnames(th)
					last := ""
					if len(f) > 0 {
						last = f[len(f)-1]
					}
					if !goRoots[last] || th.Error != nil {
						e := "<nil>"
						if th.Error != nil {
							e = *th.Error
						}
						bad[fmt.Sprintf("ends in %q, error %s", last, e)]++
						if bad[fmt.Sprintf("ends in %q, error %s", last, e)] == 1 {
							t.Logf("thread %d: %v", th.TID, f)
						}
					}
				}
			}
			for k, n := range bad {
				t.Errorf("%d thread stacks: %s", n, k)
			}
			assertUntouched(t, tg.PID, false)
		})
	}
}

// TestRealCgo: a Go program blocked in read(2) inside C code called through
// cgo unwinds from libc through C, the cgo trampolines and Go to
// runtime.goexit.
func TestRealCgo(t *testing.T) {
	testutil.Need(t, "gcc")
	tg := testutil.Start(t, buildGoTarget(t, "cgotarget"))
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	m := mustThreadWith(t, p, "c_read2")
	want := []string{"c_read2", "c_read1", "main.goReadB", "main.goReadA", "main.main", "runtime.main", "runtime.goexit"}
	if f := fnames(m); !hasSubseq(f, want) || f[len(f)-1] != "runtime.goexit" {
		t.Errorf("cgo thread: want %v in order, ending in runtime.goexit, in %v", want, f)
	}
	if m.Error != nil {
		t.Errorf("cgo thread: error %q", *m.Error)
	}
	assertUntouched(t, tg.PID, false)
}

// TestRealGoBlockedThreadsNotStopped: in the default mode, Go threads parked
// in futex or epoll_pwait are read without a ptrace stop (a stop wakes
// epoll_wait with EINTR: the netpoller is exactly what issue 6 protects).
// A g0 stack that ends at runtime.mcall is complete; taking it for
// incomplete forces a stop.
func TestRealGoBlockedThreadsNotStopped(t *testing.T) {
	for _, dir := range []string{"gotarget", "cgotarget"} {
		t.Run(dir, func(t *testing.T) {
			tg := testutil.Start(t, buildGoTarget(t, dir))
			time.Sleep(200 * time.Millisecond)
			total, stopped := 0, 0
			for round := 0; round < 5; round++ {
				p := dumpJSON(t, strconv.Itoa(tg.PID))
				for _, th := range p.Threads {
					if th.State != "S" || th.Syscall == nil {
						continue
					}
					switch th.Syscall.Name {
					case "futex", "epoll_pwait", "epoll_wait", "read":
					default:
						continue
					}
					total++
					if th.Capture != "nostop" {
						stopped++
						t.Logf("round %d: thread %d in %s captured %q: %v", round, th.TID, th.Syscall.Name, th.Capture, fnames(th))
					}
				}
			}
			if total == 0 {
				t.Fatalf("no blocked threads seen")
			}
			if stopped > 2 {
				t.Errorf("%d of %d captures of blocked Go threads used a ptrace stop in the default mode", stopped, total)
			}
			assertUntouched(t, tg.PID, false)
		})
	}
}

// TestRealGoNamesMatchGoAddr2line: every frame of a Go binary (built plain,
// with DWARF and a symbol table) is named as the Go toolchain's own
// `go tool addr2line` names it: "runtime.goexit", not the ELF symbol's
// ABI-wrapper spelling "runtime.goexit.abi0" (the stripped build already
// says runtime.goexit; a name must not depend on how the binary was built).
func TestRealGoNamesMatchGoAddr2line(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
	}{{"plain", nil}, {"stripped", []string{"-ldflags=-s -w"}}} {
		t.Run(v.name, func(t *testing.T) {
			bin := buildGoTarget(t, "gotarget", v.flags...)
			// go tool addr2line needs the symbol table: ask the plain twin,
			// whose code is identical.
			ref := buildGoTarget(t, "gotarget")
			tg := testutil.Start(t, bin, "spin")
			p := dumpJSON(t, "--mode", "stop", strconv.Itoa(tg.PID))
			var pcs []string
			var ours []string
			for _, th := range p.Threads {
				k := 0
				for _, f := range th.Frames {
					// go tool addr2line names the physical function.
					if f.Kind != "user" || f.Inlined {
						continue
					}
					k++
					if f.Module != bin {
						continue
					}
					pc, _ := strconv.ParseUint(strings.TrimPrefix(f.PC, "0x"), 16, 64)
					if k > 1 && f.Method != "signal" {
						pc--
					}
					pcs = append(pcs, fmt.Sprintf("%#x", pc))
					ours = append(ours, f.Fn())
				}
			}
			if len(pcs) < 10 {
				t.Fatalf("only %d Go frames", len(pcs))
			}
			cmd := exec.Command("go", "tool", "addr2line", ref)
			cmd.Stdin = strings.NewReader(strings.Join(pcs, "\n") + "\n")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go tool addr2line: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 2*len(pcs) {
				t.Fatalf("go tool addr2line: %d lines for %d pcs", len(lines), len(pcs))
			}
			bad := map[string]string{}
			for i := range pcs {
				if want := lines[2*i]; ours[i] != want {
					bad[ours[i]] = want
				}
			}
			for got, want := range bad {
				t.Errorf("frame named %q, go tool addr2line says %q", got, want)
			}
			assertUntouched(t, tg.PID, false)
		})
	}
}

type sysPoint struct {
	nr     int64
	sp, pc string
}

// dumpWithSyscallPoints runs a JSON dump and also returns, per thread, the
// syscall number, SP and PC /proc gave (where the thread sleeps).
func dumpWithSyscallPoints(t testing.TB, args ...string) (jProc, map[int]sysPoint) {
	t.Helper()
	out, errOut, code := runSS(t, append([]string{"dump", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("stackshot %v: exit %d\n%s", args, code, errOut)
	}
	var p jProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON: %v", err)
	}
	var raw struct {
		Threads []struct {
			TID     int `json:"tid"`
			Syscall *struct {
				Nr int64  `json:"nr"`
				SP string `json:"sp"`
				PC string `json:"pc"`
			} `json:"syscall"`
		} `json:"threads"`
	}
	json.Unmarshal([]byte(out), &raw)
	pts := map[int]sysPoint{}
	for _, th := range raw.Threads {
		if th.Syscall != nil && th.Syscall.SP != "" {
			pts[th.TID] = sysPoint{th.Syscall.Nr, th.Syscall.SP, th.Syscall.PC}
		}
	}
	return p, pts
}

// TestRealNoStopMatchesStop: a thread read without a stop (RSP and RIP only)
// must unwind to the same chain as the same thread, still asleep at the same
// syscall SP and PC, read with a full ptrace stop. Stripped Go binaries are
// the hard case: no CFI, frame pointers only, and a stale (saved RBP, return
// address) pair on the stack can fool the fp heuristic.
func TestRealNoStopMatchesStop(t *testing.T) {
	type tgt struct {
		name   string
		start  func(t *testing.T) *testutil.Target
		rounds int // Go: threads park and unpark; more rounds meet more states
	}
	for _, c := range []tgt{
		{"go-stripped", func(t *testing.T) *testutil.Target {
			return testutil.Start(t, buildGoTarget(t, "gotarget", "-ldflags=-s -w"), "spin")
		}, 12},
		{"go-stripped-pie", func(t *testing.T) *testutil.Target {
			return testutil.Start(t, buildGoTarget(t, "gotarget", "-buildmode=pie", "-ldflags=-s -w"), "spin")
		}, 12},
		{"go-cgo", func(t *testing.T) *testutil.Target {
			return testutil.Start(t, buildGoTarget(t, "cgotarget"))
		}, 4},
		{"c-O2", func(t *testing.T) *testutil.Target {
			return testutil.Start(t, buildBlocked(t, blockedVariants[1].flags))
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := c.start(t)
			compared, mismatched := 0, 0
			perTID := map[int]int{}
			for round := 0; round < c.rounds; round++ {
				p, before := dumpWithSyscallPoints(t, strconv.Itoa(tg.PID))
				for _, th := range p.Threads {
					if th.Capture != "nostop" || th.State != "S" {
						continue
					}
					pt, ok := before[th.TID]
					if !ok || perTID[th.TID] >= c.rounds/2+1 {
						continue
					}
					perTID[th.TID]++
					q, after := dumpWithSyscallPoints(t, "--mode", "stop", "-t", strconv.Itoa(th.TID), strconv.Itoa(tg.PID))
					if len(q.Threads) != 1 || after[th.TID] != pt || !stoppedAt(q.Threads[0], pt.pc) {
						continue // it ran in between (before its /proc read, or after it)
					}
					compared++
					a, b := fnames(th), fnames(q.Threads[0])
					// Known: a cgo runtime thread's stop-mode walk ends at
					// crosscall1 (its CFI ends the stack there), while the
					// no-stop walk goes on to threadentry, start_thread and
					// clone3 — more of the same, true, chain.
					if i := indexOf(b, "crosscall1"); i >= 0 && i == len(b)-1 && len(a) > i && strings.Join(a[:i+1], ";") == strings.Join(b, ";") {
						continue
					}
					if strings.Join(a, ";") != strings.Join(b, ";") {
						mismatched++
						t.Errorf("round %d thread %d (in syscall %d, sp %s): no-stop chain %v\n  stop chain %v", round, th.TID, pt.nr, pt.sp, a, b)
					}
				}
			}
			if compared == 0 {
				t.Fatalf("no thread could be compared")
			}
			t.Logf("%d comparisons, %d mismatched", compared, mismatched)
			assertUntouched(t, tg.PID, false)
		})
	}
}

func indexOf(v []string, s string) int {
	for i, x := range v {
		if x == s {
			return i
		}
	}
	return -1
}

// stoppedAt reports whether th's innermost user frame is at pc (a hex
// string): the stop found the thread still where /proc saw it blocked.
func stoppedAt(th jThread, pc string) bool {
	want, err := strconv.ParseUint(strings.TrimPrefix(pc, "0x"), 16, 64)
	if err != nil {
		return false
	}
	for _, f := range th.Frames {
		if f.Kind == "user" {
			got, err := strconv.ParseUint(strings.TrimPrefix(f.PC, "0x"), 16, 64)
			return err == nil && got == want
		}
	}
	return false
}
