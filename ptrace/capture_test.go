//go:build linux

package ptrace

import (
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/arch"
	"stackshot/internal/testutil"
	"stackshot/procmaps"
)

func startBlocked(t *testing.T, args ...string) *testutil.Target {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
	return testutil.Start(t, bin, args...)
}

func byName(p *Process) map[string]*Thread {
	m := map[string]*Thread{}
	for i := range p.Threads {
		m[p.Threads[i].Name] = &p.Threads[i]
	}
	return m
}

func TestCaptureModes(t *testing.T) {
	tg := startBlocked(t, "spin")
	// No-stop first: a stop makes recv (SO_RCVTIMEO) return EINTR and run.
	for _, mode := range []Mode{ModeNoStop, ModeAuto, ModeStop} {
		p, err := Capture(tg.PID, Options{Mode: mode, Kernel: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Threads) != 8 || p.Threads[0].TID != tg.PID {
			t.Fatalf("mode %d: %d threads, first %d", mode, len(p.Threads), p.Threads[0].TID)
		}
		if !p.SharedRoot {
			t.Errorf("mode %d: a target in stackshot's own root is not said to share it", mode)
		}
		for _, th := range p.Threads {
			spinner := th.Name == "spinner"
			switch {
			case mode == ModeStop || (mode == ModeAuto && spinner):
				if th.Method != MethodPtrace || len(th.Regs) != 27 || len(th.Stack) == 0 || th.PauseNS <= 0 {
					t.Errorf("mode %d %s: method %s regs %d stack %d pause %d", mode, th.Name, th.Method, len(th.Regs), len(th.Stack), th.PauseNS)
				}
				if sp := th.Regs[arch.UserRSP]; sp != th.StackAddr || sp < th.StackLo || sp >= th.StackHi {
					t.Errorf("%s: sp %#x, stack at %#x in [%#x,%#x)", th.Name, sp, th.StackAddr, th.StackLo, th.StackHi)
				}
			case mode == ModeNoStop && spinner:
				if th.Method != MethodProcOnly || th.Err == "" {
					t.Errorf("nostop spinner: %s %q", th.Method, th.Err)
				}
			default:
				if th.Method != MethodNoStop || th.Regs != nil || th.PauseNS != 0 || th.Torn || th.Sched == nil {
					t.Errorf("mode %d %s: method %s regs %v pause %d torn %v", mode, th.Name, th.Method, th.Regs != nil, th.PauseNS, th.Torn)
				}
				if th.Syscall == nil || th.StackAddr != th.Syscall.SP || len(th.Stack) == 0 {
					t.Errorf("%s: stack copy not from the syscall SP", th.Name)
				}
				if len(th.KernelStack) == 0 {
					t.Errorf("%s: no kernel stack", th.Name)
				}
			}
		}
	}
	if s := testutil.State(tg.PID); s == "t" || s == "T" {
		t.Fatalf("target left stopped")
	}
}

func TestCaptureConsistent(t *testing.T) {
	tg := startBlocked(t, "spin")
	p, err := Capture(tg.PID, Options{Mode: ModeStop, Consistent: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Threads) != 8 {
		t.Fatalf("%d threads", len(p.Threads))
	}
	for _, th := range p.Threads {
		if th.Method != MethodPtrace || len(th.Regs) != 27 {
			t.Errorf("%s: %s", th.Name, th.Method)
		}
	}
	for tid, s := range testutil.ThreadStates(tg.PID) {
		if s == "t" || s == "T" {
			t.Errorf("thread %d left stopped", tid)
		}
	}
}

func TestCaptureTIDs(t *testing.T) {
	tg := startBlocked(t)
	all, err := Capture(tg.PID, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := byName(all)["sleeper"].TID
	p, err := Capture(tg.PID, Options{TIDs: []int{want}}, nil)
	if err != nil || len(p.Threads) != 1 || p.Threads[0].TID != want {
		t.Fatalf("TIDs filter: %v %+v", err, p)
	}
}

func TestCaptureReuseIdleThreads(t *testing.T) {
	tg := startBlocked(t, "spin")
	cache := procmaps.NewTaskCache()
	defer cache.Close()
	first, err := Capture(tg.PID, Options{Cache: cache}, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Capture(tg.PID, Options{Cache: cache, Reuse: first}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := byName(second)
	for _, name := range []string{"reader", "condwait", "epoller", "recver"} {
		th := m[name]
		if !th.Reused || th.Method != MethodNoStop || len(th.Stack) == 0 {
			t.Errorf("%s: reused %v method %s", name, th.Reused, th.Method)
		}
	}
	if m["spinner"].Reused || m["spinner"].Method != MethodPtrace {
		t.Errorf("spinner reused (%v) or not stopped (%s)", m["spinner"].Reused, m["spinner"].Method)
	}
	// The reader wakes up when a byte arrives: it is then read afresh.
	// (It is blocked on its own pipe, which only the target writes to, so
	// use the main thread instead: "s" makes it run.)
	if ans := tg.Ask("s"); !strings.HasPrefix(ans, "eintr") {
		t.Fatalf("target: %q", ans)
	}
	third, err := Capture(tg.PID, Options{Cache: cache, Reuse: second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if third.Threads[0].Reused {
		t.Errorf("main thread ran (answered 's') but its old copy was reused")
	}
}

func TestCaptureStoppedProcess(t *testing.T) {
	tg := startBlocked(t)
	syscall.Kill(tg.PID, syscall.SIGSTOP)
	defer syscall.Kill(tg.PID, syscall.SIGCONT)
	for end := time.Now().Add(5 * time.Second); testutil.State(tg.PID) != "T" && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	for _, mode := range []Mode{ModeAuto, ModeStop} {
		for _, cons := range []bool{false, true} {
			p, err := Capture(tg.PID, Options{Mode: mode, Consistent: cons}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range p.Threads {
				if th.Method == MethodProcOnly {
					t.Errorf("mode %d consistent %v: %s proc-only: %s", mode, cons, th.Name, th.Err)
				}
			}
			time.Sleep(10 * time.Millisecond)
			for tid, s := range testutil.ThreadStates(tg.PID) {
				if s != "T" {
					t.Errorf("mode %d consistent %v: thread %d is %q, want T", mode, cons, tid, s)
				}
			}
		}
	}
}

func TestCaptureErrors(t *testing.T) {
	if _, err := Capture(1<<22+12345, Options{}, nil); err != ErrNoProcess {
		t.Errorf("missing pid: %v", err)
	}
	// A thread id is not a process id.
	tg := startBlocked(t)
	tids, _ := procmaps.Tasks(tg.PID)
	if _, err := Capture(tids[1], Options{}, nil); err == nil || !strings.Contains(err.Error(), "is a thread of") {
		t.Errorf("tid as pid: %v", err)
	}
}

func TestReadMemoryShortAtGuard(t *testing.T) {
	// Reading across the end of a mapping gives a short read, not nothing.
	maps, err := procmaps.ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var m *procmaps.Mapping
	for i := range maps {
		if maps[i].Kind == procmaps.KindStack {
			m = &maps[i]
		}
	}
	if m == nil {
		t.Skip("skipped: no [stack] mapping in this process")
	}
	buf := make([]byte, 3*4096)
	n := ReadMemory(os.Getpid(), buf, m.End-4096)
	if n != 4096 {
		t.Errorf("read %d bytes across the end of [stack], want 4096", n)
	}
}

// With many threads the check is asked beside the observers: once for
// each clean no-stop copy, and its answer still decides, thread by
// thread, which are stopped; the threads stay in task order. A check
// that panics makes Capture panic, with no thread left stopped.
func TestCaptureCheckManyThreads(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "64")
	var mu sync.Mutex
	asked := map[int]int{}
	check := func(p *Process, th *Thread) bool {
		mu.Lock()
		defer mu.Unlock()
		asked[th.TID]++
		return th.TID%2 == 0
	}
	p, err := Capture(tg.PID, Options{Mode: ModeAuto}, check)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Threads) != 65 || p.Threads[0].TID != tg.PID {
		t.Fatalf("%d threads, first %d", len(p.Threads), p.Threads[0].TID)
	}
	for i, th := range p.Threads {
		if i > 1 && th.TID <= p.Threads[i-1].TID {
			t.Errorf("thread %d (tid %d) after tid %d", i, th.TID, p.Threads[i-1].TID)
		}
		want := MethodNoStop
		if th.TID%2 != 0 {
			want = MethodPtrace
		}
		if th.Method != want || asked[th.TID] != 1 {
			t.Errorf("tid %d: %s (want %s), checked %d times", th.TID, th.Method, want, asked[th.TID])
		}
	}
	calls := 0
	boom := func(p *Process, th *Thread) bool {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 5 {
			panic("check failed")
		}
		return true
	}
	func() {
		defer func() {
			if v := recover(); v != "check failed" {
				t.Errorf("Capture with a panicking check: recovered %v", v)
			}
		}()
		Capture(tg.PID, Options{Mode: ModeAuto}, boom)
	}()
	for tid, s := range testutil.ThreadStates(tg.PID) {
		if s == "t" || s == "T" {
			t.Errorf("thread %d left stopped", tid)
		}
	}
}

// With many threads, Options.CheckAll is asked in batches while the
// threads are still being observed: the first small, every clean no-stop
// copy in exactly one batch, the answers read in the order asked and only
// after all batches were asked, and still deciding, thread by thread,
// which are stopped (a missing answer: stopped).
func TestCaptureCheckAllInBatches(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "200")
	var sizes, read []int // the batches' sizes; the batches whose answers were read, in order
	asked := map[int]int{}
	readEarly := false // an answer read before the last batch was asked
	unanswered := 0    // the thread batch 1 gets no answer for
	checkAll := func(p *Process, ths []*Thread) func() []bool {
		n := len(sizes)
		sizes = append(sizes, len(ths))
		ans := make([]bool, len(ths))
		for i, th := range ths {
			asked[th.TID]++
			ans[i] = th.TID%3 != 0
		}
		if n == 1 {
			unanswered = ths[len(ths)-1].TID
			ans = ans[:len(ans)-1]
		}
		return func() []bool {
			read = append(read, n)
			return ans
		}
	}
	opt := Options{Mode: ModeAuto, CheckAll: func(p *Process, ths []*Thread) func() []bool {
		readEarly = readEarly || len(read) > 0
		return checkAll(p, ths)
	}}
	p, err := Capture(tg.PID, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Threads) != 201 {
		t.Fatalf("%d threads", len(p.Threads))
	}
	if len(sizes) < 3 || sizes[0] != firstAskBatch || slices.Max(sizes) > askBatch {
		t.Errorf("batches of %v: want more than two, the first of %d, none over %d", sizes, firstAskBatch, askBatch)
	}
	if len(read) != len(sizes) || !slices.IsSorted(read) || readEarly {
		t.Errorf("answers of %d batches read as %v (one before the last was asked: %v)", len(sizes), read, readEarly)
	}
	for _, th := range p.Threads {
		wantStop := th.TID%3 == 0 || th.TID == unanswered
		if asked[th.TID] != 1 || (th.Method == MethodPtrace) != wantStop || th.Method != MethodPtrace && th.Method != MethodNoStop {
			t.Errorf("tid %d: %s, asked about %d times (want a stop: %v)", th.TID, th.Method, asked[th.TID], wantStop)
		}
	}
}
