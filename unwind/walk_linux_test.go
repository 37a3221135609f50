//go:build linux

package unwind

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// x86-64 syscall numbers the targets block in.
const (
	sysRead           = 0
	sysRtSigsuspend   = 130
	sysFutex          = 202
	sysClockNanoslp   = 230
	sysRecvfrom       = 45
	sysRtSigtimedwait = 128
	sysEpollWait      = 232
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

func TestWalkSignalFrame(t *testing.T) {
	bin := buildTarget(t, "gcc", "target.c", cFlagsO2...)
	tg := startTarget(t, bin, "signal")
	waitSyscall(t, tg.pid, tg.pid, sysRead)
	if err := unix.Kill(tg.pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	tg.expectLine(t, "handler")
	waitSyscall(t, tg.pid, tg.pid, sysRtSigsuspend)
	s := newSpace(t, tg.pid)
	frames, stop := unwindThread(t, tg.pid, tg.pid, s, 0)
	want := concat([]string{"sigsuspend|__sigsuspend|__GI___sigsuspend", "h_wait", "handler", "__restore_rt",
		readFrame, "c_read", "b_read", "a_read"}, mainRoot)
	checkChain(t, s, frames, stop, want, StopEnd)
	if len(frames) > 5 {
		if sf := frames[3]; !sf.SignalFrame || sf.Method != MethodSignal {
			t.Errorf("frame 3: SignalFrame=%v Method=%v, want a signal frame", sf.SignalFrame, sf.Method)
		}
		if f := frames[4]; !f.Exact || f.Method != MethodSignal {
			t.Errorf("frame 4 (interrupted): Exact=%v Method=%v", f.Exact, f.Method)
		}
	}
}

// sampleSuffix interrupts thread tid n times and checks that every walk
// ends with the frames in suffix and reaches the end of the stack. It
// returns how many samples had frame 0 where the test wants it: in a
// mapping named inMap, and (when inFunc is set) in a function so named.
func sampleSuffix(t *testing.T, tg *target, tid int, n int, suffix []string, inMap string, inFunc func(string) bool) int {
	t.Helper()
	s := newSpace(t, tg.pid)
	bad, hits := 0, 0
	for i := range n {
		frames, stop := unwindThread(t, tg.pid, tid, s, 0)
		names := s.symbolize(frames)
		if m, ok := s.find(frames[0].PC); ok && m.path == inMap && (inFunc == nil || inFunc(names[0])) {
			hits++
		}
		ok := stop == StopEnd && len(names) >= len(suffix) && matchChain(names[len(names)-len(suffix):], suffix)
		if !ok {
			bad++
			if bad <= 3 {
				t.Logf("sample %d incomplete (stop %v):\n%s", i, stop, describe(frames, names))
			}
		}
	}
	t.Logf("%d/%d samples complete, %d with frame 0 in %s", n-bad, n, hits, inMap)
	if bad*100 > n {
		t.Errorf("%d of %d samples incomplete (more than 1%%)", bad, n)
	}
	return hits
}

func TestWalkVDSO(t *testing.T) {
	bin := buildTarget(t, "gcc", "target.c", cFlagsO2...)
	tg := startTarget(t, bin, "vdso")
	tids := tg.threads(t)
	if len(tids) != 2 {
		t.Fatalf("threads %v", tids)
	}
	hits := sampleSuffix(t, tg, tids[1], 200, concat([]string{"v_spin3", "v_spin2", "v_spin"}, threadRoot), "[vdso]", nil)
	if hits == 0 {
		t.Error("no sample stopped inside the vdso: the test proves nothing")
	}
}

func TestWalkPLTSpin(t *testing.T) {
	bin := buildTarget(t, "gcc", "target.c", cFlagsO2...)
	tg := startTarget(t, bin, "plt")
	tids := tg.threads(t)
	if len(tids) != 2 {
		t.Fatalf("threads %v", tids)
	}
	// Samples rarely land in the PLT stub itself (a jmp or two, under 1%
	// of samples and none at all in some runs), so frame 0 inside a PLT
	// entry is tested deterministically, instruction by instruction, by
	// TestPLTFrame0; this one checks that walks through PLT calls complete.
	sampleSuffix(t, tg, tids[1], 200, concat([]string{"p_spin3", "p_spin2", "p_spin"}, threadRoot), "", nil)
}

func TestWalkCxxCatch(t *testing.T) {
	bin := buildTarget(t, "g++", "throw.cc", "-O2", "-fomit-frame-pointer", "-g")
	tg := startTarget(t, bin)
	waitSyscall(t, tg.pid, tg.pid, sysRead)
	s := newSpace(t, tg.pid)
	frames, stop := unwindThread(t, tg.pid, tg.pid, s, 0)
	checkChain(t, s, frames, stop, concat([]string{readFrame, "_Z7blockerv", "_Z7catcheri*"}, mainRoot), StopEnd)
}

// readSyscall parses /proc/PID/task/TID/syscall: number, 6 args, sp, pc.
func readSyscall(t *testing.T, pid, tid int) (sp, pc uint64, args [6]uint64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 9 {
		t.Fatalf("syscall line %q", b)
	}
	var v [8]uint64
	for i := range v {
		if v[i], err = strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64); err != nil {
			t.Fatal(err)
		}
	}
	copy(args[:], v[:6])
	return v[6], v[7], args
}

// Partial registers (issue 6): only SP, PC and the syscall arguments are
// known, read from /proc without stopping the thread; every chain must be
// complete in every round, -O0 frame-pointer code above wrappers that do
// not save RBP through the fp-heuristic.
func TestWalkPartialRegs(t *testing.T) {
	for _, v := range []struct {
		name   string
		flags  []string
		fpHeur bool
	}{
		{"O2", cFlagsO2, false},
		{"O0fp", []string{"-O0", "-fno-omit-frame-pointer", "-g", "-pthread"}, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			bin := buildTarget(t, "gcc", "target.c", v.flags...)
			tg := startTarget(t, bin, "blocked")
			tids := tg.threads(t)
			if len(tids) != 6 {
				t.Fatalf("threads %v", tids)
			}
			type th struct {
				nr    int
				chain []string
			}
			want := map[int]th{
				tids[0]: {sysRead, concat([]string{readFrame, "c_read", "b_read", "a_read"}, mainRoot)},
				tids[1]: {sysClockNanoslp, concat([]string{"clock_nanosleep*|__clock_nanosleep*", "nanosleep|__nanosleep", "t_sleep3", "t_sleep2", "t_sleep"}, threadRoot)},
				tids[2]: {sysFutex, concat([]string{"__futex_abstimed_wait_common*|__GI___futex_abstimed_wait_cancelable64|futex_wait*", "*pthread_cond_wait*", "t_cond2", "t_cond"}, threadRoot)},
				tids[3]: {sysEpollWait, concat([]string{"epoll_wait|__epoll_wait", "e_wait3", "e_wait2", "e_wait"}, threadRoot)},
				tids[4]: {sysRecvfrom, concat([]string{"recv|__recv|__libc_recv", "r_recv3", "r_recv2", "r_recv"}, threadRoot)},
				tids[5]: {sysRtSigtimedwait, concat([]string{"sigtimedwait|__sigtimedwait*", "s_wait3", "s_wait2", "s_wait"}, threadRoot)},
			}
			for _, tid := range tids {
				waitSyscall(t, tg.pid, tid, want[tid].nr)
			}
			s := newSpace(t, tg.pid)
			heur := 0
			for round := range 20 {
				for _, tid := range tids {
					sp, pc, args := readSyscall(t, tg.pid, tid)
					m, ok := s.find(sp)
					if !ok {
						t.Fatalf("sp %#x unmapped", sp)
					}
					data := make([]byte, m.end-sp)
					n, err := unix.ProcessVMReadv(tg.pid, []unix.Iovec{{Base: &data[0], Len: uint64(len(data))}},
						[]unix.RemoteIovec{{Base: uintptr(sp), Len: len(data)}}, 0)
					if err != nil {
						t.Fatal(err)
					}
					in := &Input{Regs: RegsFromSyscall(sp, pc, args), Stack: Stack{Addr: sp, Data: data[:n]},
						StackLo: m.start, StackHi: m.end, Space: s}
					frames, stop := Unwind(in, nil)
					if round == 0 || t.Failed() {
						checkChain(t, s, frames, stop, want[tid].chain, StopEnd)
					} else if names := s.symbolize(frames); !matchChain(names, want[tid].chain) || stop != StopEnd {
						t.Fatalf("round %d thread %d:\n%s", round, tid, describe(frames, names))
					}
					for _, f := range frames {
						if f.Method == MethodFPHeuristic {
							heur++
						}
					}
				}
			}
			if v.fpHeur != (heur > 0) {
				t.Errorf("%d fp-heuristic frames; want some: %v", heur, v.fpHeur)
			}
		})
	}
}

// noSignalCFI hides the 'S' rows of every table, so the walker must find
// the signal trampoline by its code bytes.
type noSignalCFI struct {
	*space
	tabs map[*Table]*Table
}

func (n *noSignalCFI) Lookup(addr uint64) (ModuleInfo, bool) {
	mi, ok := n.space.Lookup(addr)
	if ok && mi.CFI != nil {
		c, done := n.tabs[mi.CFI]
		if !done {
			cp := *mi.CFI
			cp.sets = append([]uint32(nil), cp.sets...)
			for i, s := range cp.sets {
				if s != noRow && cp.rules[s].Signal {
					cp.sets[i] = noRow
				}
			}
			c = &cp
			n.tabs[mi.CFI] = c
		}
		mi.CFI = c
	}
	return mi, ok
}

func TestWalkSignalTrampolineBytes(t *testing.T) {
	bin := buildTarget(t, "gcc", "target.c", cFlagsO2...)
	tg := startTarget(t, bin, "signal")
	waitSyscall(t, tg.pid, tg.pid, sysRead)
	if err := unix.Kill(tg.pid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	tg.expectLine(t, "handler")
	waitSyscall(t, tg.pid, tg.pid, sysRtSigsuspend)
	s := newSpace(t, tg.pid)
	c := captureThread(t, tg.pid, tg.pid, s)
	in := &Input{Regs: c.regs, Stack: c.stack, StackLo: c.lo, StackHi: c.hi,
		Space: &noSignalCFI{space: s, tabs: map[*Table]*Table{}}}
	frames, stop := Unwind(in, nil)
	want := concat([]string{"sigsuspend|__sigsuspend|__GI___sigsuspend", "h_wait", "handler", "__restore_rt",
		readFrame, "c_read", "b_read", "a_read"}, mainRoot)
	checkChain(t, s, frames, stop, want, StopEnd)
	if len(frames) > 3 && !frames[3].SignalFrame {
		t.Error("frame 3 is not marked as the signal frame")
	}
}

// Go code has no .eh_frame but keeps frame pointers, and its .debug_frame
// omits the RBP rule; asmcgocall runs C on the system stack with the
// goroutine's frame pointer in RBP. The walk must cross back onto the
// goroutine stack (read through Mem) and end at runtime.goexit.
func TestWalkGoCgo(t *testing.T) {
	bin := buildTarget(t, "go", "gocgo.go", "build")
	tg := startTarget(t, bin)
	waitSyscall(t, tg.pid, tg.pid, sysRead)
	s := newSpace(t, tg.pid)
	frames, stop := unwindThread(t, tg.pid, tg.pid, s, 0)
	want := []string{readFrame, "c_block2", "runtime.asmcgocall*", "runtime.cgocall", "main._Cfunc_c_block*",
		"main.goB", "main.goA", "main.main", "runtime.main", "runtime.goexit*"}
	checkChain(t, s, frames, stop, want, StopPCZero)
}

// BenchmarkUnwindWarm measures a warm CFI unwind of a real 34-frame stack
// (read, c_read, b_read, a_read, 26 x rec, main and libc's start frames)
// captured once from a live -O2 target; tables are already loaded.
func BenchmarkUnwindWarm(b *testing.B) {
	bin := buildTarget(b, "gcc", "target.c", cFlagsO2...)
	cmd := exec.Command(bin, "recurse", "25")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pid := cmd.Process.Pid
	b.Cleanup(func() { _ = unix.Kill(pid, unix.SIGKILL); _ = cmd.Wait() })
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if sc, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid)); strings.HasPrefix(string(sc), "0 ") {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	s := newSpace(b, pid)
	c := captureThread(b, pid, pid, s)
	in := &Input{Regs: c.regs, Stack: c.stack, StackLo: c.lo, StackHi: c.hi, Space: s}
	frames, stop := Unwind(in, nil)
	if len(frames) != 34 || stop != StopEnd {
		b.Fatalf("%d frames, stop %v", len(frames), stop)
	}
	buf := make([]Frame, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = Unwind(in, buf[:0])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(frames)), "ns/frame")
}

func TestWalkGoPure(t *testing.T) {
	want := []string{"*Syscall6", "syscall.RawSyscall6", "syscall.Syscall", "syscall.read", "main.goB", "main.goA",
		"main.main", "runtime.main", "runtime.goexit*"}
	for _, v := range []struct {
		name  string
		flags []string
		stop  StopReason
	}{
		// .debug_frame CFI; the return address above goexit is 0.
		{"debug_frame", []string{"build"}, StopPCZero},
		// Frame pointers only, down to the chain's terminating 0.
		{"no-dwarf", []string{"build", "-ldflags=-w"}, StopEnd},
	} {
		t.Run(v.name, func(t *testing.T) {
			bin := buildTarget(t, "go", "gopure.go", v.flags...)
			tg := startTarget(t, bin)
			waitSyscall(t, tg.pid, tg.pid, sysRead)
			s := newSpace(t, tg.pid)
			frames, stop := unwindThread(t, tg.pid, tg.pid, s, 0)
			checkChain(t, s, frames, stop, want, v.stop)
		})
	}
}
