//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// In the default mode, threads blocked in epoll_wait, recv with
// SO_RCVTIMEO, sigtimedwait, read, pthread_cond_wait and nanosleep are read
// without a ptrace stop: 100 dumps give complete chains every time and the
// target sees no EINTR. The same target in --mode stop does see EINTR,
// which proves the difference.
func TestNoStopNoEINTR(t *testing.T) {
	for _, v := range blockedVariants {
		t.Run(v.name, func(t *testing.T) {
			tg := testutil.Start(t, buildBlocked(t, v.flags))
			for i := 0; i < 100; i++ {
				p := dumpJSON(t, fmt.Sprint(tg.PID))
				checkBlocked(t, p, tg.PID)
				for _, th := range p.Threads {
					if th.Capture != "nostop" || th.PauseUS != 0 {
						t.Fatalf("dump %d: thread %q captured %q with pause %.1fus, want nostop and 0", i, th.Name, th.Capture, th.PauseUS)
					}
				}
				if t.Failed() {
					t.Fatalf("dump %d failed", i)
				}
			}
			e := parseEINTR(t, tg.Ask("s"))
			if e != (eintrCounts{}) {
				t.Errorf("after 100 default-mode dumps the target saw EINTR: %+v", e)
			}
			for i := 0; i < 10; i++ {
				if _, errOut, code := runSS(t, "--mode", "stop", fmt.Sprint(tg.PID)); code != 0 {
					t.Fatalf("stop-mode dump: exit %d: %s", code, errOut)
				}
			}
			e = parseEINTR(t, tg.Ask("s"))
			if e.epoll == 0 || e.recv == 0 || e.sigwait == 0 {
				t.Errorf("10 stop-mode dumps caused no EINTR in epoll_wait/recv/sigtimedwait: %+v (the test cannot tell the modes apart)", e)
			}
			t.Logf("after 10 stop-mode dumps: %+v", e)
		})
	}
}

// A thread whose walk without a stop is incomplete is stopped in the
// default mode, unless a stop would make its system call fail with EINTR:
// an event loop built with frame pointers, blocked in epoll_wait from its
// start routine (its frame is found only through RBP, which a read
// without a stop lacks), keeps its incomplete no-stop stack, says why,
// and never sees EINTR; in --mode stop it does.
func TestNoStopSparesInterruptibleCalls(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags), "evloop")
	for i := 0; i < 20; i++ {
		p := dumpJSON(t, fmt.Sprint(tg.PID))
		th := threadByName(t, p, "evloop")
		if th.Capture != "nostop" || th.PauseUS != 0 {
			t.Fatalf("dump %d: evloop captured %q with pause %.1fus, want nostop and 0", i, th.Capture, th.PauseUS)
		}
		if th.Error == nil || !strings.Contains(*th.Error, "a stop would make its epoll_wait fail with EINTR") {
			t.Fatalf("dump %d: evloop's error %v does not say why it was not stopped", i, th.Error)
		}
		if f := userFuncs(th); len(f) < 2 || f[0] != "epoll_wait" || f[1] != "evloop" {
			t.Fatalf("dump %d: evloop's frames %v, want epoll_wait evloop first", i, f)
		}
		// The chains that do unwind without a stop stay unstopped.
		if ep := threadByName(t, p, "epoller"); ep.Capture != "nostop" || ep.Error != nil {
			t.Fatalf("dump %d: epoller captured %q, error %v", i, ep.Capture, ep.Error)
		}
	}
	if got := tg.Ask("d"); got != "evloop eintr=0" {
		t.Errorf("after 20 default-mode dumps the event loop says %q, want no EINTR", got)
	}
	for i := 0; i < 5; i++ {
		if _, errOut, code := runSS(t, "--mode", "stop", fmt.Sprint(tg.PID)); code != 0 {
			t.Fatalf("stop-mode dump: exit %d: %s", code, errOut)
		}
	}
	if got := tg.Ask("d"); got == "evloop eintr=0" {
		t.Errorf("5 stop-mode dumps caused no EINTR in the event loop (%q): the test cannot tell the modes apart", got)
	}
}

// A thread that sleeps for random sub-millisecond times and runs between
// them must never give a torn stack: every chain reported is one the
// program can have.
func TestNoStopNeverTorn(t *testing.T) {
	for _, v := range blockedVariants {
		t.Run(v.name, func(t *testing.T) {
			tg := testutil.Start(t, buildBlocked(t, v.flags), "jitter")
			seen := map[string]int{}
			for i := 0; i < 100; i++ {
				p := dumpJSON(t, "--no-kernel", fmt.Sprint(tg.PID))
				th := threadByName(t, p, "jitter")
				f := userFuncs(th)
				// Drop libc frames above our code (nanosleep wrappers).
				k := 0
				for k < len(f) && !strings.HasPrefix(f[k], "jit_") {
					k++
				}
				own := strings.Join(f[k:], " ")
				valid := []string{
					"jit_b jit_a start start_thread __clone3",
					"jit_leaf jit_work jit_b jit_a start start_thread __clone3",
					"jit_work jit_b jit_a start start_thread __clone3",
				}
				ok := false
				for _, want := range valid {
					if own == want {
						ok = true
					}
				}
				if !ok || th.Error != nil {
					t.Errorf("dump %d: impossible chain %v (capture %s, error %v)", i, f, th.Capture, th.Error)
				}
				seen[th.Capture]++
				// The threads that never wake are read without a stop,
				// every time.
				for _, o := range p.Threads {
					if o.Name != "jitter" && o.Capture != "nostop" {
						t.Errorf("dump %d: blocked thread %q captured %q, want nostop", i, o.Name, o.Capture)
					}
				}
			}
			t.Logf("jitter thread captures: %v", seen)
			// It sleeps most of the time: a build that stopped it every
			// time (or never read it without a stop) fails here.
			if seen["nostop"] == 0 {
				t.Errorf("the jitter thread was never read without a stop in 100 dumps: %v", seen)
			}
		})
	}
}

func TestNoStopMode(t *testing.T) {
	tg := testutil.Start(t, buildBlocked(t, blockedVariants[1].flags), "spin")
	p := dumpJSON(t, "--mode", "nostop", fmt.Sprint(tg.PID))
	for _, th := range p.Threads {
		switch th.Name {
		case "spinner":
			if th.Capture != "proc-only" || th.Error == nil {
				t.Errorf("spinner: capture %q error %v, want proc-only with a reason", th.Capture, th.Error)
			}
		default:
			if th.Capture != "nostop" {
				t.Errorf("%s: capture %q, want nostop", th.Name, th.Capture)
			}
		}
	}
	assertThreadChain(t, threadByName(t, p, "epoller"), "epoll_c", "epoll_b", "epoll_a", "start")
	if e := parseEINTR(t, tg.Ask("s")); e != (eintrCounts{}) {
		t.Errorf("nostop mode caused EINTR: %+v", e)
	}
}
