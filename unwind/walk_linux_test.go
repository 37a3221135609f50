//go:build linux

package unwind

import (
	"testing"
)

// x86-64 syscall numbers the targets block in.
const (
	sysRead         = 0
	sysRtSigsuspend = 130
	sysFutex        = 202
	sysClockNanoslp = 230
	sysNanosleep    = 35
)

// The outermost frames glibc puts under main and under every thread.
var (
	mainRoot   = []string{"main", "__libc_start_call_main", "__libc_start_main*", "_start"}
	threadRoot = []string{"start_thread", "clone3|__clone3|__GI___clone3"}
	readFrame  = "read|__read|__libc_read|__GI___libc_read|__read_nocancel"
)

func concat(parts ...[]string) []string {
	var r []string
	for _, p := range parts {
		r = append(r, p...)
	}
	return r
}

func checkChain(t *testing.T, s *space, frames []Frame, stop StopReason, want []string, wantStop StopReason) {
	t.Helper()
	names := s.symbolize(frames)
	if testing.Verbose() {
		t.Logf("stop %v\n%s", stop, describe(frames, names))
	}
	if !matchChain(names, want) || stop != wantStop {
		t.Errorf("chain (stop: %v, want %v):\n%swant %v", stop, wantStop, describe(frames, names), want)
	}
	for i, f := range frames {
		if f.Exact != (i == 0) && !(i > 0 && frames[i-1].SignalFrame) {
			t.Errorf("frame %d: Exact=%v", i, f.Exact)
		}
	}
}

func TestWalkChainO2(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
		root  []string
	}{
		{"O2", cFlagsO2, mainRoot},
		{"O0fp", []string{"-O0", "-fno-omit-frame-pointer", "-g", "-pthread"}, mainRoot},
		{"static", append([]string{"-static"}, cFlagsO2...), mainRoot},
	} {
		t.Run(v.name, func(t *testing.T) {
			bin := buildTarget(t, "gcc", "target.c", v.flags...)
			tg := startTarget(t, bin, "chain")
			waitSyscall(t, tg.pid, tg.pid, sysRead)
			s := newSpace(t, tg.pid)
			frames, stop := unwindThread(t, tg.pid, tg.pid, s, 0)
			checkChain(t, s, frames, stop, concat([]string{readFrame, "c_read", "b_read", "a_read"}, v.root), StopEnd)
			for i, f := range frames[1:] {
				if f.Method != MethodCFI {
					t.Errorf("frame %d found by %v, want cfi", i+1, f.Method)
				}
			}
		})
	}
}

func TestWalkThreads(t *testing.T) {
	bin := buildTarget(t, "gcc", "target.c", cFlagsO2...)
	tg := startTarget(t, bin, "threads")
	tids := tg.threads(t)
	if len(tids) != 3 {
		t.Fatalf("threads %v, want 3", tids)
	}
	waitSyscall(t, tg.pid, tids[0], sysRead)
	waitSyscall(t, tg.pid, tids[1], sysClockNanoslp)
	waitSyscall(t, tg.pid, tids[2], sysFutex)
	s := newSpace(t, tg.pid)
	want := map[int][]string{
		tids[0]: concat([]string{readFrame, "c_read", "b_read", "a_read"}, mainRoot),
		tids[1]: concat([]string{"clock_nanosleep*|__clock_nanosleep*", "nanosleep|__nanosleep", "t_sleep3", "t_sleep2", "t_sleep"}, threadRoot),
		tids[2]: concat([]string{"__futex_abstimed_wait_common*|__GI___futex_abstimed_wait_cancelable64|futex_wait*", "*pthread_cond_wait*", "t_cond2", "t_cond"}, threadRoot),
	}
	for _, tid := range tids {
		frames, stop := unwindThread(t, tg.pid, tid, s, 0)
		checkChain(t, s, frames, stop, want[tid], StopEnd)
	}
}

func TestWalkRecursion5000(t *testing.T) {
	bin := buildTarget(t, "gcc", "target.c", cFlagsO2...)
	tg := startTarget(t, bin, "recurse", "5000")
	waitSyscall(t, tg.pid, tg.pid, sysRead)
	s := newSpace(t, tg.pid)
	frames, stop := unwindThread(t, tg.pid, tg.pid, s, 6000)
	var want []string
	want = append(want, readFrame, "c_read", "b_read", "a_read")
	for range 5001 {
		want = append(want, "rec")
	}
	want = append(want, mainRoot...)
	names := s.symbolize(frames)
	if !matchChain(names, want) || stop != StopEnd {
		n := min(len(frames), 12)
		t.Fatalf("recursion: %d frames, stop %v, want %d frames; first:\n%s", len(frames), stop, len(want), describe(frames[:n], names[:n]))
	}
	// The same walk with a frame limit stops there.
	frames, stop = unwindThread(t, tg.pid, tg.pid, s, 100)
	if len(frames) != 100 || stop != StopMaxFrames {
		t.Errorf("MaxFrames 100: %d frames, stop %v", len(frames), stop)
	}
}

// Without unwind tables the walker falls back to frame pointers (when the
// code keeps them) or to stack scanning, and CFI takes over again in libc.
func TestWalkFallbacks(t *testing.T) {
	noTables := []string{"-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-g0", "-pthread"}
	for _, v := range []struct {
		name   string
		flags  []string
		method Method
	}{
		{"fp", append([]string{"-O0", "-fno-omit-frame-pointer"}, noTables...), MethodFP},
		{"scan", append([]string{"-O2", "-fomit-frame-pointer"}, noTables...), MethodScan},
	} {
		t.Run(v.name, func(t *testing.T) {
			bin := buildTarget(t, "gcc", "target.c", v.flags...)
			tg := startTarget(t, bin, "chain")
			waitSyscall(t, tg.pid, tg.pid, sysRead)
			s := newSpace(t, tg.pid)
			frames, stop := unwindThread(t, tg.pid, tg.pid, s, 0)
			checkChain(t, s, frames, stop, concat([]string{readFrame, "c_read", "b_read", "a_read"}, mainRoot), StopEnd)
			// read's caller comes from libc's CFI; the callers of our
			// table-less functions from the fallback.
			for i := 2; i <= 4 && i < len(frames); i++ {
				if frames[i].Method != v.method {
					t.Errorf("frame %d found by %v, want %v", i, frames[i].Method, v.method)
				}
			}
		})
	}
}
