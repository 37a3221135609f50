//go:build linux

package hotspot_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/goruntime"
	"stackshot/hotspot"
	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// jvmReady bounds a JVM's start and settling on a loaded machine.
const jvmReady = 3 * time.Minute

// startThreads starts testdata/hotspot/Threads.java, logging what the JIT
// compiles to jitLog.
func startThreads(t *testing.T) (tg *testutil.Target, jitLog string) {
	t.Helper()
	testutil.Need(t, "javac")
	testutil.Need(t, "jar")
	java := testutil.Need(t, "java")
	jar := testutil.Artifact(t, "threads.jar", testutil.Testdata("hotspot"),
		[]string{"javac", "-d", "$DIR/classes", "$SRC/Threads.java"},
		[]string{"jar", "cf", "$OUT", "-C", "$DIR/classes", "."})
	jitLog = filepath.Join(t.TempDir(), "jit.log")
	tg = testutil.StartWithin(t, jvmReady, java, "-Xlog:jit+compilation=debug:file="+jitLog, "-cp", jar, "Threads")
	return tg, jitLog
}

// waitCompiled waits until the JIT log says C2 (level 4) compiled the
// method ("Threads::spin").
func waitCompiled(t *testing.T, jitLog, method string) {
	t.Helper()
	end := time.Now().Add(jvmReady)
	for time.Now().Before(end) {
		b, _ := os.ReadFile(jitLog)
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 4 && strings.Contains(l, " "+method+" ") && (f[len(f)-4] == "4" || f[len(f)-6] == "4") && !strings.Contains(l, "made not entrant") {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the JIT did not compile %s at level 4 within %v", method, jvmReady)
}

// jframe is one Java frame: "pkg.Class.method" and its line (0 none).
type jframe struct {
	fn   string
	line int
}

func (f jframe) String() string { return fmt.Sprintf("%s:%d", f.fn, f.line) }

// jstackFrames runs jstack -l on pid: each JavaThread's Java frames, by
// name.
func jstackFrames(t *testing.T, pid int) map[string][]jframe {
	t.Helper()
	return parseJstack(jstackText(t, pid))
}

// jstackText is jstack -l's dump of pid.
func jstackText(t *testing.T, pid int) string {
	t.Helper()
	jstack := testutil.Need(t, "jstack")
	out, err := exec.Command(jstack, "-l", strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		t.Fatalf("jstack: %v\n%s", err, out)
	}
	return string(out)
}

// parseJstack reads jstack's dump: each JavaThread's Java frames, by
// name; a native method's line is -1 ("Native Method").
func parseJstack(out string) map[string][]jframe {
	threads := map[string][]jframe{}
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "\"") {
			cur = ""
			// A JavaThread's header has its number ("#12"); the VM's
			// own threads have none.
			if end := strings.Index(l[1:], "\""); end >= 0 && strings.HasPrefix(l[end+2:], " #") {
				cur = l[1 : end+1]
				threads[cur] = []jframe{}
			}
			continue
		}
		at, ok := strings.CutPrefix(strings.TrimSpace(l), "at ")
		if !ok || cur == "" {
			continue
		}
		open := strings.LastIndex(at, "(")
		f := jframe{fn: at[:open]}
		src := strings.TrimSuffix(at[open+1:], ")")
		if i := strings.LastIndex(src, ":"); i >= 0 {
			f.line, _ = strconv.Atoi(src[i+1:])
		} else if strings.HasSuffix(src, "Native Method") {
			f.line = -1
		}
		threads[cur] = append(threads[cur], f)
	}
	return threads
}

// dump resolves one live capture of pid.
func dump(t *testing.T, pid int) *report.Process {
	t.Helper()
	r := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true})
	p, err := r.CaptureLive(pid, ptrace.Options{Mode: ptrace.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	return r.Process(p, ptrace.MemReader{PID: p.MemPID()})
}

// javaFrames are a thread's Java frames, with their types.
func javaFrames(th *report.Thread) (fr []jframe, types []string) {
	for _, f := range th.Frames {
		if f.Kind == "java" {
			line := f.Line
			if f.FrameType == hotspot.NativeMethod && f.File == "" {
				line = -1 // as parseJstack writes "Native Method"
			}
			fr = append(fr, jframe{f.Function, line})
			types = append(types, f.FrameType.String())
		}
	}
	return fr, types
}

func byJavaName(p *report.Process) map[string]*report.Thread {
	out := map[string]*report.Thread{}
	for i := range p.Threads {
		if n := p.Threads[i].JavaName; n != "" {
			out[n] = &p.Threads[i]
		}
	}
	return out
}

// Threads blocked in Thread.sleep, Object.wait, ReentrantLock.lock and a
// read from main, and one in a compiled method with inlined callees:
// every JavaThread is named as jstack names it, and each one's Java frames
// are jstack's, method by method and line by line, at the place in the
// native stack where they run (between JVM_Sleep and the call stub).
func TestJavaFramesMatchJstack(t *testing.T) {
	tg, _ := startThreads(t)
	p := dump(t, tg.PID)
	want := jstackFrames(t, tg.PID) // (after the dump: jstack attaches)
	for _, w := range p.Warnings {
		t.Logf("warning: %s", w)
	}
	if p.Runtime == nil || p.Runtime.Name != "java" || !strings.HasPrefix(p.Runtime.Version, "17.") && !strings.Contains(p.Runtime.Version, ".") {
		t.Errorf("runtime %+v, want java and its release", p.Runtime)
	}
	got := byJavaName(p)
	for _, name := range []string{"main", "sleeper", "waiter", "locker", "napper"} {
		th := got[name]
		if th == nil {
			t.Errorf("no thread named %q; Java names read: %v", name, keys(got))
			continue
		}
		fr, types := javaFrames(th)
		if fmt.Sprint(fr) != fmt.Sprint(want[name]) {
			t.Errorf("thread %q: Java frames\n got %v\nwant %v (jstack)", name, fr, want[name])
		}
		t.Logf("%s: %v %v", name, fr, types)
	}
	if th := got["sleeper"]; th != nil {
		assertNativeAround(t, th, "JVM_Sleep", "StubRoutines::call_stub")
	}
	// napper sleeps from napInner, inlined into compiled code.
	if th := got["napper"]; th != nil {
		_, types := javaFrames(th)
		i := slicesIndex(types, "inlined")
		if i < 0 || i+1 >= len(types) || types[i+1] != "inlined" && types[i+1] != "compiled" {
			t.Errorf("napper: frame types %v, want napInner inlined into compiled code", types)
		}
	}
	for n := range want {
		if got[n] == nil && n != "Attach Listener" { // (jstack's own, started after the dump)
			t.Errorf("jstack names thread %q, the dump has none of that name", n)
		}
	}
	corruptTables(t, tg.PID)
}

// corruptTables resolves a capture of the JVM pid through memory whose
// VM tables are corrupt (the fields table's entry size reads 0): its
// threads keep their native frames, and one warning says Java frames were
// not read.
func corruptTables(t *testing.T, pid int) {
	t.Helper()
	ms, err := procmaps.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	var stride uint64
	for i := range ms {
		m := &ms[i]
		if !hotspot.IsLibJVM(m.Path) || m.Offset != 0 {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		sym, err := hotspot.TableSymbols(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		bias, ok := goruntime.LoadBias(f, m.Start, m.Offset)
		if !ok {
			t.Fatal("libjvm.so's load bias")
		}
		stride = sym["gHotSpotVMStructEntryArrayStride"] + bias
		break
	}
	if stride == 0 {
		t.Fatal("no libjvm.so mapped")
	}
	r := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true})
	p, err := r.CaptureLive(pid, ptrace.Options{Mode: ptrace.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	rp := r.Process(p, zeroAt{ptrace.MemReader{PID: pid}, stride})
	var warned []string
	for _, w := range rp.Warnings {
		if strings.Contains(w, "Java") {
			warned = append(warned, w)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "Java frames not read") {
		t.Errorf("warnings %q, want one saying Java frames were not read", rp.Warnings)
	}
	for _, th := range rp.Threads {
		for _, f := range th.Frames {
			if f.Kind == "java" || th.JavaName != "" {
				t.Fatalf("thread %d: a Java frame or name from corrupt tables: %+v %q", th.TID, f, th.JavaName)
			}
		}
		if strings.Contains(fmt.Sprint(functionsOf(th)), "JVM_Sleep") {
			return // the sleeper's native frames are there
		}
	}
	t.Error("no thread has its native JVM_Sleep frame")
}

// zeroAt reads memory with the 8 bytes at addr zeroed.
type zeroAt struct {
	r    io.ReaderAt
	addr uint64
}

func (z zeroAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := z.r.ReadAt(p, off)
	for i := range p[:n] {
		if a := uint64(off) + uint64(i); a >= z.addr && a < z.addr+8 {
			p[i] = 0
		}
	}
	return n, err
}

func functionsOf(th report.Thread) []string {
	var out []string
	for _, f := range th.Frames {
		out = append(out, f.Function)
	}
	return out
}

// assertNativeAround checks that th's Java frames lie right after native
// frame inner and right before outer.
func assertNativeAround(t *testing.T, th *report.Thread, inner, outer string) {
	t.Helper()
	first, last := -1, -1
	for i, f := range th.Frames {
		if f.Kind == "java" {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 1 || last+1 >= len(th.Frames) {
		t.Errorf("thread %q: Java frames at %d..%d of %d", th.JavaName, first, last, len(th.Frames))
		return
	}
	if got := th.Frames[first-1].Function; got != inner {
		t.Errorf("thread %q: the frame before its Java frames is %q, want %q", th.JavaName, got, inner)
	}
	if got := th.Frames[last+1].Function; got != outer {
		t.Errorf("thread %q: the frame after its Java frames is %q, want %q", th.JavaName, got, outer)
	}
}

func slicesIndex(s []string, v string) int {
	for i := range s {
		if s[i] == v {
			return i
		}
	}
	return -1
}

func keys(m map[string]*report.Thread) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A thread spinning in a method C2 compiled (the JIT's log says when) is
// read at the instruction it runs: its compiled frame, then the
// interpreted ones jstack shows, and its UTF-16 name.
func TestJavaCompiledSpinner(t *testing.T) {
	tg, jitLog := startThreads(t)
	waitCompiled(t, jitLog, "Threads::spin")
	const name = "spinner-\u00e9\u4e2d"
	var th *report.Thread
	var fr []jframe
	var types []string
	// The loop enters the compiled code at its next back branch; a dump
	// that caught it before then is taken again.
	for try := 0; try < 20; try++ {
		th = byJavaName(dump(t, tg.PID))[name]
		if th == nil {
			t.Fatalf("no thread named %q", name)
		}
		fr, types = javaFrames(th)
		if len(types) > 0 && types[0] != "interpreted" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := jstackFrames(t, tg.PID)[name]
	// At the instruction it runs the loop may be in mix, inlined.
	for len(fr) > 0 && types[0] == "inlined" && fr[0].fn == "Threads.mix" {
		fr, types = fr[1:], types[1:]
	}
	if len(fr) == 0 || len(want) == 0 || fr[0].fn != "Threads.spin" || types[0] != "compiled" {
		t.Fatalf("spinner: Java frames %v %v, want Threads.spin compiled first (jstack: %v)", fr, types, want)
	}
	fr[0].line, want[0].line = 0, 0 // (where in the loop differs)
	if fmt.Sprint(fr) != fmt.Sprint(want) {
		t.Errorf("spinner: Java frames\n got %v\nwant %v (jstack)", fr, want)
	}
}
