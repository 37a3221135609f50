//go:build linux

package ptrace

import (
	"fmt"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
)

// tracerPid is TracerPid of one thread of pid, from /proc, once it is 0
// or after 5 s: an abandoned tracer thread detaches its tracees when it
// exits, which follows the capture by a moment.
func tracerPid(t *testing.T, pid, tid int) int {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			t.Fatal(err)
		}
		if tp := procmaps.ParseStatus(b).TracerPid; tp == 0 || time.Now().After(end) {
			return tp
		}
	}
}

// withoutStacks is p with the mappings holding its threads' stacks left
// out, as if the threads had been born after the maps were read.
func withoutStacks(p *Process) *Process {
	q := *p
	q.Maps = nil
	for _, m := range p.Maps {
		holds := false
		for _, th := range p.Threads {
			if m.Contains(th.StackAddr) {
				holds = true
			}
		}
		if !holds {
			q.Maps = append(q.Maps, m)
		}
	}
	return &q
}

// A stack whose mapping is not in the known maps has its bounds found
// after the detach, never by re-reading the maps while threads are
// stopped, in consistent mode as in stop mode.
func TestNoMapsReadInsideStop(t *testing.T) {
	tg := startBlocked(t)
	first, err := Capture(tg.PID, Options{Mode: ModeNoStop}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reads, inStop := 0, 0
	mapsReadHook = func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		for _, s := range testutil.ThreadStates(pid) {
			if s == "t" {
				inStop++
				return
			}
		}
	}
	defer func() { mapsReadHook = nil }()
	for _, cons := range []bool{true, false} {
		reads, inStop = 0, 0
		p, err := Capture(tg.PID, Options{Mode: ModeStop, Consistent: cons, Reuse: withoutStacks(first)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if reads == 0 {
			t.Fatalf("consistent %v: the maps were never read again: the test does not test", cons)
		}
		if inStop > 0 {
			t.Errorf("consistent %v: %d of %d maps reads happened while a thread was stopped", cons, inStop, reads)
		}
		for _, th := range p.Threads {
			if th.Method != MethodPtrace || th.StackAddr < th.StackLo || th.StackAddr >= th.StackHi {
				t.Errorf("consistent %v: %s: %s, sp %#x in [%#x,%#x)", cons, th.Name, th.Method, th.StackAddr, th.StackLo, th.StackHi)
			}
		}
	}
}

// When PTRACE_INTERRUPT fails after PTRACE_SEIZE succeeded, the thread is
// detached (the tracer thread outlives the capture) and the outcome says so.
func TestInterruptFailureDetaches(t *testing.T) {
	tg := startBlocked(t)
	tids, _ := procmaps.Tasks(tg.PID)
	victim := tids[len(tids)-1]
	interruptHook = func(tid int) error {
		if tid == victim {
			return unix.EIO
		}
		return unix.PtraceInterrupt(tid)
	}
	defer func() { interruptHook = nil }()
	for _, cons := range []bool{false, true} {
		p, err := Capture(tg.PID, Options{Mode: ModeStop, Consistent: cons}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range p.Threads {
			switch {
			case th.TID == victim && (th.Outcome != OutcomeInterruptFailed || th.Method != MethodProcOnly):
				t.Errorf("consistent %v: victim: outcome %v, method %s (%q)", cons, th.Outcome, th.Method, th.Err)
			case th.TID != victim && th.Outcome != OutcomeCaptured:
				t.Errorf("consistent %v: %s: outcome %v (%q)", cons, th.Name, th.Outcome, th.Err)
			}
		}
		if tp := tracerPid(t, tg.PID, victim); tp != 0 {
			// Killing it now would leave a zombie only its tracer may reap.
			t.Fatalf("consistent %v: thread %d left traced by %d", cons, victim, tp)
		}
	}
}

// A thread another tracer holds cannot be seized: its outcome says so,
// in both modes (consistent mode once dropped the error).
func TestSeizeFailureReported(t *testing.T) {
	tg := startBlocked(t)
	tids, _ := procmaps.Tasks(tg.PID)
	victim := tids[len(tids)-1]
	// Another tracer: a tracer thread of our own, outside any capture.
	other := newTracer()
	var err error
	other.do(func() { err = unix.PtraceSeize(victim) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Its thread's exit detaches the victim.
		other.do(func() { other.abandoned.Store(true) })
		if tp := tracerPid(t, tg.PID, victim); tp != 0 {
			t.Fatalf("the test's own tracer did not let go of %d", victim)
		}
	}()
	for _, cons := range []bool{false, true} {
		p, err := Capture(tg.PID, Options{Mode: ModeStop, Consistent: cons}, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, th := range p.Threads {
			if th.TID != victim {
				continue
			}
			found = true
			if th.Outcome != OutcomeNotPermitted || th.Method != MethodProcOnly {
				t.Errorf("consistent %v: victim: outcome %v, method %s (%q)", cons, th.Outcome, th.Method, th.Err)
			}
		}
		if !found {
			t.Errorf("consistent %v: victim missing", cons)
		}
	}
}

// The deadline never cuts a stop's wait below minStopWait: a healthy
// thread must not be given up on because the command's time is short.
func TestStopWaitFloor(t *testing.T) {
	for _, left := range []time.Duration{-time.Second, 0, time.Millisecond, 50 * time.Millisecond} {
		c := &capturer{opt: Options{StopWait: DefaultStopWait, Deadline: time.Now().Add(left)}}
		if w := c.stopWait(); w < minStopWait {
			t.Errorf("%v left: wait %v, want at least %v", left, w, minStopWait)
		}
	}
	c := &capturer{opt: Options{StopWait: DefaultStopWait, Deadline: time.Now().Add(time.Hour)}}
	if w := c.stopWait(); w != DefaultStopWait {
		t.Errorf("far deadline: wait %v, want %v", w, DefaultStopWait)
	}
}

// A thread that will not stop (a vfork parent) is reported with the wait
// it was really given, not what was left of the deadline afterwards.
func TestNotStoppedStatesItsWait(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "vfork.c")}, "-O0", "-g", "-fno-omit-frame-pointer")
	for _, cons := range []bool{false, true} {
		// A fresh target each time: the stuck stop of the last one holds
		// its parent traced until the vfork ends.
		tg := testutil.Start(t, bin, "2000")
		p, err := Capture(tg.PID, Options{Mode: ModeStop, Consistent: cons, Deadline: time.Now().Add(150 * time.Millisecond)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		th := p.Threads[0]
		if th.Outcome != OutcomeNotStopped {
			t.Fatalf("consistent %v: outcome %v (%q), want %v", cons, th.Outcome, th.Err, OutcomeNotStopped)
		}
		m := regexp.MustCompile(`within (\S+) `).FindStringSubmatch(th.Err)
		if m == nil {
			t.Fatalf("consistent %v: no wait in %q", cons, th.Err)
		}
		if d, err := time.ParseDuration(m[1]); err != nil || d < minStopWait || d > 150*time.Millisecond {
			t.Errorf("consistent %v: %q states a wait of %s, want the %v..150ms given", cons, th.Err, m[1], minStopWait)
		}
		if line, err := tg.ReadLine(10 * time.Second); err != nil || line != "back" {
			t.Fatalf("parent did not come back from vfork: %q %v", line, err)
		}
		if tp := tracerPid(t, tg.PID, tg.PID); tp != 0 {
			t.Fatalf("vfork parent left traced by %d", tp)
		}
	}
}

// A kernel thread makes no system calls: it is given none (its syscall
// file reads "0 0x0 ... 0x0", which once became read(0, ...)).
func TestKernelThreadHasNoSyscall(t *testing.T) {
	if _, err := procmaps.ReadSyscall(2, 2); err != nil {
		testutil.Skip(t, fmt.Sprintf("/proc/2/task/2/syscall is not readable here (%v)", err))
	}
	p, err := Capture(2, Options{Kernel: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	th := p.Threads[0]
	if !th.Kernel || th.Outcome != OutcomeKernelThread || th.Syscall != nil {
		t.Errorf("kthreadd: kernel %v outcome %v syscall %+v", th.Kernel, th.Outcome, th.Syscall)
	}
}

// Options.StackBytes bounds every thread's copy, in every mode.
func TestStackBytesBoundsCopy(t *testing.T) {
	tg := startBlocked(t, "spin")
	for _, mode := range []Mode{ModeNoStop, ModeAuto, ModeStop} {
		for _, cons := range []bool{false, true} {
			p, err := Capture(tg.PID, Options{Mode: mode, Consistent: cons, StackBytes: 64}, nil)
			if err != nil {
				t.Fatal(err)
			}
			copies := 0
			for _, th := range p.Threads {
				if len(th.Stack) > 64 {
					t.Errorf("mode %d consistent %v: %s copied %d stack bytes, want at most 64", mode, cons, th.Name, len(th.Stack))
				}
				if len(th.Stack) > 0 {
					copies++
				}
			}
			if copies == 0 {
				t.Errorf("mode %d consistent %v: no copies at all", mode, cons)
			}
		}
	}
}

// A tracer never serves on the process's main thread, which the runtime
// parks instead of ending, so an abandoned tracer there would keep its
// tracees traced.
func TestTracerNotOnMainThread(t *testing.T) {
	for i := 0; i < 20; i++ {
		tr := newTracer()
		tid := 0
		tr.do(func() { tid = unix.Gettid() })
		tr.close()
		if tid == 0 || tid == unix.Getpid() {
			t.Fatalf("tracer %d serves on thread %d (the main thread is %d)", i, tid, unix.Getpid())
		}
	}
}
