//go:build linux

package hotspot_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// dumpNoJava resolves one live capture of pid as --no-java does.
func dumpNoJava(t *testing.T, pid int) *report.Process {
	t.Helper()
	r := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true, NoJava: true})
	p, err := r.CaptureLive(pid, ptrace.Options{Mode: ptrace.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	return r.Process(p, ptrace.MemReader{PID: p.MemPID()})
}

// byComm finds a thread by its kernel name (a JavaThread's is its Java
// name, cut to 15 bytes).
func byComm(p *report.Process, comm string) *report.Thread {
	for i := range p.Threads {
		if p.Threads[i].Name == comm {
			return &p.Threads[i]
		}
	}
	return nil
}

// inOrder is the index in fns of each of want's prefixes, in order, or
// the first one missing.
func inOrder(fns []string, want ...string) (int, bool) {
	at := 0
	for _, w := range want {
		for at < len(fns) && !strings.HasPrefix(fns[at], w) {
			at++
		}
		if at == len(fns) {
			return slicesIndex(want, w), false
		}
	}
	return 0, true
}

// With --no-java a thread sleeping in Java keeps its native frames below
// the Java ones (the walk still goes through the interpreter's and the
// JIT's frames by the code cache's layouts): the JVM's call chain down to
// start_thread, and no Java frame, name or runtime.
func TestJavaNoJavaKeepsNativeFrames(t *testing.T) {
	tg, _ := startThreads(t)
	p := dumpNoJava(t, tg.PID)
	for _, w := range p.Warnings {
		t.Logf("warning: %s", w)
	}
	if p.Runtime != nil {
		t.Errorf("runtime %+v under --no-java", p.Runtime)
	}
	for _, th := range p.Threads {
		if th.JavaName != "" {
			t.Errorf("thread %d: Java name %q under --no-java", th.TID, th.JavaName)
		}
		for _, f := range th.Frames {
			if f.Kind == "java" {
				t.Fatalf("thread %d %q: a Java frame under --no-java: %+v", th.TID, th.Name, f)
			}
		}
	}
	for _, name := range []string{"sleeper", "napper"} {
		th := byComm(p, name)
		if th == nil {
			t.Fatalf("no thread named %q", name)
		}
		fns := functionsOf(*th)
		if i, ok := inOrder(fns, "JVM_Sleep", "StubRoutines::call_stub", "JavaCalls::call_helper", "thread_native_entry", "start_thread"); !ok {
			t.Errorf("thread %q under --no-java: frames %q lack the native chain from its %d'th name on", name, fns, i)
		}
		if slicesIndex(fns, "") >= 0 {
			t.Errorf("thread %q under --no-java: unnamed frames (the Java ones walked as unknown code): %q", name, fns)
		}
		t.Logf("%s: %q", name, fns)
	}
}

// A native method that calls back into Java: the callback's Java frames,
// then the C function (named from the library's symbols, at the line of
// its call in jni.c), then the native method and its Java callers; the
// Java frames are jstack's, "Native Method" included.
func TestJavaJNICallback(t *testing.T) {
	testutil.Need(t, "javac")
	testutil.Need(t, "gcc")
	java := testutil.Need(t, "java")
	real, err := filepath.EvalSymlinks(java)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Dir(filepath.Dir(real))
	if _, err := os.Stat(filepath.Join(home, "include", "jni.h")); err != nil {
		testutil.Need(t, filepath.Join(home, "include", "jni.h"))
	}
	src := testutil.Testdata("hotspot")
	classes := testutil.Artifact(t, "jni-classes", src, []string{"javac", "-d", "$OUT", "$SRC/Jni.java"})
	lib := testutil.Artifact(t, "libjnicb.so", src, []string{"gcc", "-shared", "-fPIC", "-g", "-O1",
		"-fno-omit-frame-pointer", "-I" + home + "/include", "-I" + home + "/include/linux", "-o", "$OUT", "$SRC/jni.c"})
	tg := testutil.StartWithin(t, jvmReady, java, "-cp", classes, "Jni", lib)
	p := dump(t, tg.PID)
	want := jstackFrames(t, tg.PID)["jni-caller"]
	th := byJavaName(p)["jni-caller"]
	if th == nil {
		t.Fatalf("no thread named jni-caller; Java names: %v", keys(byJavaName(p)))
	}
	fr, types := javaFrames(th)
	t.Logf("jni-caller: %v %v\n%q", fr, types, functionsOf(*th))
	if fmt.Sprint(fr) != fmt.Sprint(want) {
		t.Errorf("jni-caller: Java frames\n got %v\nwant %v (jstack)", fr, want)
	}
	line := lineOf(t, filepath.Join(src, "jni.c"), "// CALLBACK")
	sleepy, c, native := -1, -1, -1
	for i, f := range th.Frames {
		switch {
		case f.Kind == "java" && f.Function == "Jni.sleepy":
			sleepy = i
		case f.Kind != "java" && f.Function == "Java_Jni_callBack":
			c = i
			if f.Line != line || filepath.Base(f.File) != "jni.c" {
				t.Errorf("Java_Jni_callBack at %s:%d, want jni.c:%d (its call of sleepy)", f.File, f.Line, line)
			}
		case f.Kind == "java" && f.Function == "Jni.callBack":
			native = i
			if f.FrameType != 0 || f.File != "" {
				t.Errorf("the native method's frame %+v, want no type or file", f)
			}
		}
	}
	if sleepy < 0 || c < 0 || native < 0 || !(sleepy < c && c < native) {
		t.Errorf("frames Jni.sleepy %d, Java_Jni_callBack %d, Jni.callBack %d: want them in that order", sleepy, c, native)
	}
}

// lineOf is the number of path's line holding mark.
func lineOf(t *testing.T, path, mark string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, mark) {
			return i + 1
		}
	}
	t.Fatalf("%s has no %q", path, mark)
	return 0
}

// A JVM that cannot reach a safepoint (a thread in C2 code without a
// poll while another asks for a GC): stackshot reads every thread's Java
// frames all the same, and the VM thread waiting in the safepoint's
// synchronization. What jstack does (it needs a safepoint) is logged.
func TestJavaStuckAtSafepoint(t *testing.T) {
	testutil.Need(t, "javac")
	java := testutil.Need(t, "java")
	src := testutil.Testdata("hotspot")
	classes := testutil.Artifact(t, "safepoint-classes", src, []string{"javac", "-d", "$OUT", "$SRC/Safepoint.java"})
	jitLog := filepath.Join(t.TempDir(), "jit.log")
	tg := testutil.StartWithin(t, jvmReady, java, "-XX:-UseCountedLoopSafepoints", "-Xbatch",
		"-Xlog:jit+compilation=debug:file="+jitLog, "-cp", classes, "Safepoint")
	want := map[string][]string{
		"spinner":   {"Safepoint.count", "Safepoint.spinner"},
		"gc-caller": {"java.lang.Runtime.gc", "java.lang.System.gc", "Safepoint.gcCaller"},
		"main":      {"java.io.FileInputStream.readBytes"},
	}
	// Wait (bounded) until the VM thread is in the safepoint's
	// synchronization: gc-caller asks for it after "ready".
	var p *report.Process
	end := time.Now().Add(jvmReady)
	for {
		p = dump(t, tg.PID)
		var fns []string
		if vm := byComm(p, "VM Thread"); vm != nil {
			fns = functionsOf(*vm)
		}
		if strings.Contains(fmt.Sprint(fns), "SafepointSynchronize::") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the VM thread did not start a safepoint within %v: %q", jvmReady, fns)
		}
		time.Sleep(500 * time.Millisecond)
	}
	got := byJavaName(p)
	for name, w := range want {
		th := got[name]
		if th == nil {
			t.Errorf("no thread named %q; Java names: %v", name, keys(got))
			continue
		}
		fr, types := javaFrames(th)
		var fns []string
		for _, f := range fr {
			fns = append(fns, f.fn)
		}
		if i, ok := inOrder(fns, w...); !ok {
			t.Errorf("thread %q: Java frames %v, want %q in order (missing from %d)", name, fr, w, i)
		}
		t.Logf("%s: %v %v", name, fr, types)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, "timeout", "20", testutil.Need(t, "jstack"), "-l", strconv.Itoa(tg.PID)).CombinedOutput()
	t.Logf("jstack -l under timeout 20: %v after %v; %d bytes of output: %.400q", err, time.Since(start).Round(time.Second), len(out), out)
	if vm := byComm(dump(t, tg.PID), "VM Thread"); vm != nil {
		t.Logf("VM Thread after jstack: %q", functionsOf(*vm))
	}
}
