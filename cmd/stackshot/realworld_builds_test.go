//go:build linux

package main

// Real-world tests: C built every way a distribution might (link modes,
// stripped), in another mount namespace, deleted or replaced, with signal
// handlers, coroutines and an exited main thread.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// lldDir finds a directory holding an ld.lld gcc can use (-B), from an LLVM
// install or rustc's bundled copy.
func lldDir() string {
	if p, err := exec.LookPath("ld.lld"); err == nil {
		return filepath.Dir(p)
	}
	if out, err := exec.Command("rustc", "--print", "sysroot").Output(); err == nil {
		root := strings.TrimSpace(string(out))
		d := filepath.Join(root, "lib", "rustlib", "x86_64-unknown-linux-gnu", "bin", "gcc-ld")
		if _, err := os.Stat(filepath.Join(d, "ld.lld")); err == nil {
			return d
		}
	}
	return ""
}

// TestRealLinkModes dumps blocked.c linked static, static-pie, non-PIE and
// with lld (whose segments have file offset != virtual address: a wrong
// load bias gives wrong names and wrong CFI rows).
func TestRealLinkModes(t *testing.T) {
	base := []string{"-O2", "-g", "-fomit-frame-pointer", "-pthread"}
	variants := []struct {
		name  string
		flags []string
		need  func(t *testing.T)
	}{
		{"static", []string{"-static"}, nil},
		{"static-pie", []string{"-static-pie"}, nil},
		{"no-pie", []string{"-no-pie"}, nil},
		{"pie-O0-fp", []string{"-pie", "-O0", "-fno-omit-frame-pointer"}, nil},
		{"lld", nil, func(t *testing.T) {
			if lldDir() == "" {
				testutil.Skip(t, "no ld.lld on this machine (neither LLVM's nor rustc's)")
			}
		}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			flags := append(append([]string{}, base...), v.flags...)
			if v.need != nil {
				v.need(t)
			}
			if v.name == "lld" {
				flags = append(flags, "-fuse-ld=lld", "-B"+lldDir())
			}
			bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, flags...)
			tg := testutil.Start(t, bin)
			p := dumpJSON(t, strconv.Itoa(tg.PID))
			if strings.HasPrefix(v.name, "static") {
				checkBlockedChains(t, p)
			} else {
				checkBlocked(t, p, tg.PID)
			}
			assertUntouched(t, tg.PID, false)
		})
	}
}

// checkBlockedChains checks blocked.c's chains (for static binaries, where
// checkBlocked's libc.so expectations do not apply).
func checkBlockedChains(t *testing.T, p jProc) {
	t.Helper()
	if len(p.Threads) != 7 {
		t.Fatalf("want 7 threads, got %d", len(p.Threads))
	}
	for name, chain := range map[string][]string{
		"reader":    {"reader_c", "reader_b", "reader_a", "start"},
		"condwait":  {"cond_c", "cond_b", "cond_a", "start"},
		"sleeper":   {"sleep_c", "sleep_b", "sleep_a", "start"},
		"epoller":   {"epoll_c", "epoll_b", "epoll_a", "start"},
		"recver":    {"recv_c", "recv_b", "recv_a", "start"},
		"sigwaiter": {"sigw_c", "sigw_b", "sigw_a", "start"},
	} {
		assertThreadChain(t, threadByName(t, p, name), chain...)
	}
	assertMainChain(t, p.Threads[0], "main_wait", "main")
}

// TestRealStripped: a stripped PIE has no names for its static functions,
// but the stack must still be complete and every frame must point into the
// function nm finds at that address in the unstripped twin.
func TestRealStripped(t *testing.T) {
	testutil.Need(t, "strip")
	full := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-fomit-frame-pointer", "-pthread")
	stripped := filepath.Join(t.TempDir(), "blocked-stripped")
	if out, err := exec.Command("strip", "-o", stripped, full).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, out)
	}
	syms := nmSymbols(t, full)
	name := func(off uint64) string {
		for _, s := range syms {
			if off >= s.addr && off < s.addr+s.size {
				return s.raw
			}
		}
		return ""
	}
	tg := testutil.Start(t, stripped)
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	th := threadByName(t, p, "reader")
	var got []string
	k := 0
	for _, f := range th.Frames {
		if f.Kind != "user" || f.Inlined {
			continue
		}
		k++
		if f.Module != stripped {
			got = append(got, f.Fn())
			continue
		}
		off, _ := strconv.ParseUint(strings.TrimPrefix(f.ModuleOffset, "0x"), 16, 64)
		if k > 1 {
			off--
		}
		got = append(got, name(off))
	}
	want := []string{"reader_c", "reader_b", "reader_a", "start", "start_thread"}
	if !hasChain(got, want) || !endsInThreadRoot(got) {
		t.Errorf("reader in the stripped binary: frames map (by nm of the unstripped twin) to %v, want %v ... clone3", got, want)
	}
	assertUntouched(t, tg.PID, false)
}

// TestRealMountNamespace: the target's binary exists only in its own mount
// namespace (a tmpfs mounted over a directory there).
func TestRealMountNamespace(t *testing.T) {
	testutil.Need(t, "unshare")
	if os.Geteuid() != 0 {
		testutil.Skip(t, "mount namespaces need root")
	}
	bin := buildBlocked(t, blockedVariants[1].flags)
	dir := t.TempDir()
	script := fmt.Sprintf("mount -t tmpfs none %s && cp %s %s/ns-only && exec %s/ns-only", dir, bin, dir, dir)
	tg := testutil.Start(t, "unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script)
	if _, err := os.Stat(filepath.Join(dir, "ns-only")); err == nil {
		t.Fatalf("the binary is visible outside the namespace; the test proves nothing")
	}
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	checkBlocked(t, p, tg.PID)
	for _, f := range p.Threads[0].Frames {
		if f.BuildIDMismatch {
			t.Errorf("frame marked build_id_mismatch: %+v", f)
		}
	}
	assertUntouched(t, tg.PID, false)
}

// TestRealDeletedAndReplacedBinary: the binary is deleted after start, then
// a different program is put at its path; names must stay right (the
// mapped inode), never the new file's.
func TestRealDeletedAndReplacedBinary(t *testing.T) {
	src := buildBlocked(t, blockedVariants[1].flags)
	other := buildBlocked(t, blockedVariants[0].flags)
	path := filepath.Join(t.TempDir(), "victim")
	copyFile(t, src, path)
	tg := testutil.Start(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	t.Run("deleted", func(t *testing.T) {
		checkBlocked(t, dumpJSON(t, strconv.Itoa(tg.PID)), tg.PID)
	})
	copyFile(t, other, path)
	t.Run("replaced", func(t *testing.T) {
		p := dumpJSON(t, strconv.Itoa(tg.PID))
		checkBlocked(t, p, tg.PID)
	})
	assertUntouched(t, tg.PID, false)
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestRealSignalHandler: a thread blocked inside a signal handler unwinds
// through the signal frame into the code it interrupted.
func TestRealSignalHandler(t *testing.T) {
	for _, v := range blockedVariants {
		t.Run(v.name, func(t *testing.T) {
			tg := testutil.Start(t, testutil.Build(t, "gcc", []string{realSrc("sighandler.c")}, v.flags...))
			p := dumpJSON(t, strconv.Itoa(tg.PID))
			th := threadByName(t, p, "victim")
			f := fnames(th)
			if !hasSubseq(f, []string{"handler_b", "handler"}) || !hasChain(f, []string{"victim_b", "victim_a", "victim", "start_thread"}) || !endsInThreadRoot(f) {
				t.Errorf("victim: want handler_b, handler, <signal frame>, victim_b, victim_a, victim, start_thread, clone3: %v", f)
			}
			sig := false
			for _, fr := range th.Frames {
				if fr.Method == "signal" {
					sig = true
				}
			}
			if !sig {
				t.Errorf("victim: no frame with method signal")
			}
			assertMainChain(t, p.Threads[0], "main")
			assertUntouched(t, tg.PID, false)
		})
	}
}

// TestRealLeaderExited: the main thread called pthread_exit; the leader is a
// zombie but the process is alive. Its /proc/PID/maps is empty; the maps
// are readable through a live thread. The worker must unwind with names,
// and the process must not be called a zombie.
func TestRealLeaderExited(t *testing.T) {
	tg := testutil.Start(t, testutil.Build(t, "gcc", []string{realSrc("leaderexit.c")}, "-O2", "-g", "-pthread"))
	if !waitState(tg.PID, "Z", 5*time.Second) {
		t.Fatalf("main thread did not exit")
	}
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	w := threadByName(t, p, "worker")
	assertThreadChain(t, w, "worker_b", "worker_a", "worker")
	for _, warn := range p.Warnings {
		if strings.Contains(warn, "zombie") && strings.Contains(warn, "waits for its parent") {
			t.Errorf("a live process with an exited main thread is reported as a zombie: %q", warn)
		}
	}
	if p.Exe == "" {
		t.Errorf("exe empty; /proc/PID/task/TID/exe of the live thread gives it")
	}
	// record must not take the zombie leader for the end of the process.
	folded := filepath.Join(t.TempDir(), "p.folded")
	_, errOut, code := runSS(t, "record", "--idle", "-F", "50", "-d", "500ms", "-o", folded, strconv.Itoa(tg.PID))
	if code != 0 {
		t.Fatalf("record: exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "exited") {
		t.Errorf("record says the live process exited: %q", errOut)
	}
	b, _ := os.ReadFile(folded)
	if !strings.Contains(string(b), ";worker_a;worker_b") {
		t.Errorf("no sample of worker_a;worker_b in the profile:\n%s", b)
	}
	assertUntouched(t, tg.PID, false)
}

// TestRealCoroutineAndAltStack: a ucontext coroutine runs on a heap stack;
// the unwind must not wander from it onto another thread's stack (frames
// such as _start under a non-main thread would be a made-up stack). A
// handler on a sigaltstack unwinds back onto the thread's own stack.
func TestRealCoroutineAndAltStack(t *testing.T) {
	for _, v := range blockedVariants {
		t.Run(v.name, func(t *testing.T) {
			tg := testutil.Start(t, testutil.Build(t, "gcc", []string{realSrc("coro.c")}, v.flags...))
			p := dumpJSON(t, strconv.Itoa(tg.PID))
			co := threadByName(t, p, "coro")
			f := fnames(co)
			if !hasChain(f, []string{"co_b", "co_a"}) {
				t.Errorf("coro: want co_b, co_a in %v", f)
			}
			// Known limitation, not asserted: makecontext pushes
			// __start_context's own address as the coroutine's return
			// address, so the caller lookup at pc-1 lands in the function
			// before it, and the walk can run on into the frames of the
			// thread that called swapcontext (with frame pointers, their
			// chain really is linked there).
			for _, n := range f {
				if n == "main" || n == "_start" || n == "__libc_start_call_main" || n == "__libc_start_main_impl" {
					t.Logf("known limitation: coro thread's stack runs on into %q: %v", n, f)
					break
				}
			}
			alt := threadByName(t, p, "alt")
			af := fnames(alt)
			if !hasSubseq(af, []string{"alt_b", "alt_handler", "altv_b", "altv_a", "alt_thread"}) || !endsInThreadRoot(af) {
				t.Errorf("alt: want alt_b, alt_handler, <signal frame>, pause, altv_b, altv_a, alt_thread, start_thread, clone3: %v", af)
			}
			assertMainChain(t, p.Threads[0], "main")
			assertUntouched(t, tg.PID, false)
		})
	}
}
