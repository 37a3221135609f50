//go:build linux

package main

// report of aarch64 cores: programs built with aarch64-linux-gnu-gcc, run
// under qemu-aarch64-static (which writes the guest's core, an aarch64 ELF
// core naming no files: the modules come from the dynamic linker's list),
// read on this x86-64 machine and compared with gdb-multiarch on the same
// core.

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

const arm64Sysroot = "/usr/aarch64-linux-gnu"

// arm64Core builds testdata/targets/arm64/crash.c with flags, runs it
// under qemu until it dies of its SIGSEGV handler's abort, and returns
// the executable and qemu's core of it.
func arm64Core(t *testing.T, flags ...string) (exe, core string) {
	t.Helper()
	testutil.Need(t, "aarch64-linux-gnu-gcc")
	exe = testutil.Build(t, "aarch64-linux-gnu-gcc", []string{testutil.Testdata("targets", "arm64", "crash.c")},
		append([]string{"-g", "-pthread"}, flags...)...)
	core, _ = qemuCore(t, exe, nil, false)
	return exe, core
}

// qemuCore runs the aarch64 program exe under qemu (env added) until it
// dies of a signal: its own, or, with abortReady, the SIGABRT sent to it
// once it prints "ready". It returns qemu's core of it and what the
// program wrote on stderr.
func qemuCore(t *testing.T, exe string, env []string, abortReady bool) (core, stderr string) {
	t.Helper()
	testutil.Need(t, "qemu-aarch64-static")
	dir := t.TempDir()
	// qemu writes qemu_<prog>_<date>_<pid>.core into its working
	// directory when the guest dies of a signal (RLIMIT_CORE permitting);
	// then it kills itself with the signal, and the kernel may write its
	// own core of qemu there too, which is removed.
	cmd := exec.Command("sh", "-c", `ulimit -c unlimited; exec qemu-aarch64-static -cpu max -L "$1" "$2"`, "sh", arm64Sysroot, exe)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// (the shell execs qemu: its pid is qemu's)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if abortReady && sc.Text() == "ready" {
				cmd.Process.Signal(syscall.SIGABRT)
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("the aarch64 program did not die within 5 minutes")
	}
	os.Remove(filepath.Join(dir, "core"))
	cores, _ := filepath.Glob(filepath.Join(dir, "qemu_*.core"))
	if len(cores) != 1 {
		t.Fatalf("qemu left %d cores in %s, want 1\n%s", len(cores), dir, errBuf.String())
	}
	t.Cleanup(func() { os.Remove(cores[0]) })
	return cores[0], errBuf.String()
}

// namedChain is the named functions of a thread's frames, innermost
// first, up to main (or the thread's start routine); unnamed frames and
// the signal frame are left out.
func namedChain(fns []string) []string {
	var out []string
	for _, f := range fns {
		if f == "" || f == "??" || strings.HasPrefix(f, "<signal") {
			continue
		}
		out = append(out, f)
		if f == "main" {
			break
		}
	}
	return out
}

var gdbFrameLine = regexp.MustCompile(`^#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)`)
var gdbLWP = regexp.MustCompile(`^Thread \d+ .*\(LWP (\d+)\)\)?:`)

// gdbChains runs gdb-multiarch's backtrace command bt on core (with the
// cross sysroot) within d, and returns the functions of each thread it
// printed, by thread id. (gdb 13 spins unwinding the main thread of the C
// programs' cores from libc's frame 0: their tests ask for thread 2 only.)
func gdbChains(t *testing.T, exe, core string, d time.Duration, bt string) map[int][]string {
	t.Helper()
	testutil.Need(t, "gdb-multiarch")
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := exec.CommandContext(ctx, "gdb-multiarch", "-nx", "-batch", "-ex", "set debuginfod enabled off",
		"-ex", "set sysroot "+arm64Sysroot, "-ex", bt, exe, core).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb-multiarch: %v\n%s", err, out)
	}
	chains := map[int][]string{}
	tid := 0
	for _, l := range strings.Split(string(out), "\n") {
		if m := gdbLWP.FindStringSubmatch(l); m != nil {
			tid, _ = strconv.Atoi(m[1])
		} else if m := gdbFrameLine.FindStringSubmatch(l); m != nil && tid != 0 {
			chains[tid] = append(chains[tid], m[1])
		}
	}
	return chains
}

// TestReportARM64Core: an aarch64 core from qemu, reported with -e and
// --sysroot, has the program's known chains (through the signal frame,
// with frame pointers or CFI alone, with return addresses signed by
// pointer authentication), and the chains gdb-multiarch finds.
func TestReportARM64Core(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
		deep  int  // recurse frames the main thread shows
		gdb   bool // compare with gdb-multiarch
	}{
		{"O0-fp", []string{"-O0", "-no-pie"}, 6, true},
		{"O2-nofp", []string{"-O2", "-fomit-frame-pointer", "-no-pie"}, 1, true},
		// Return addresses signed (qemu -cpu max runs paciasp): without
		// stripping, the walk ends at on_segv. gdb 13 cannot unwind
		// these ("Register 69 is not available": qemu's core has no
		// NT_ARM_PAC_MASK).
		{"O2-pac", []string{"-O2", "-mbranch-protection=standard", "-no-pie"}, 1, false},
		// gdb 13 does not relocate a PIE executable from qemu's core.
		{"O0-pie", []string{"-O0", "-fpie", "-pie"}, 6, false},
	} {
		t.Run(v.name, func(t *testing.T) {
			exe, core := arm64Core(t, v.flags...)
			p := reportCore(t, "--sysroot", arm64Sysroot, "-e", exe, core)
			if len(p.Threads) != 2 {
				t.Fatalf("%d threads, want 2", len(p.Threads))
			}
			var got [2][]string
			sawSignal := false
			for i, th := range p.Threads[:2] {
				var fns []string
				for _, f := range th.Frames {
					fn := ""
					if f.Function != nil {
						fn = *f.Function
					}
					fns = append(fns, fn)
					sawSignal = sawSignal || f.SignalFrame
				}
				got[i] = namedChain(fns)
			}
			want := []string{"raise", "abort", "on_segv"}
			for range v.deep {
				want = append(want, "recurse")
			}
			want = append(want, "main")
			if !slices.Equal(got[0], want) {
				t.Errorf("main thread: %v\nwant %v", got[0], want)
			}
			if !sawSignal {
				t.Errorf("no signal frame between on_segv and recurse")
			}
			if w := []string{"pause", "leaf_wait", "worker_b", "worker_a"}; !slices.Equal(got[1], w) {
				t.Errorf("worker thread: %v\nwant %v", got[1], w)
			}
			if !v.gdb {
				return
			}
			// gdb-multiarch on the same core names the same functions.
			g := gdbChains(t, exe, core, 2*time.Minute, "thread apply 2 bt")
			for _, th := range p.Threads[1:2] {
				gc := namedChain(g[th.TID])
				if len(gc) < 4 {
					t.Fatalf("gdb-multiarch's chain of thread %d is %v: too short to compare", th.TID, g[th.TID])
				}
				var fns []string
				for _, f := range th.Frames {
					if f.Function != nil {
						fns = append(fns, *f.Function)
					}
				}
				if ours := namedChain(fns); !slices.Equal(ours, gc) {
					t.Errorf("thread %d: stackshot %v, gdb-multiarch %v", th.TID, ours, gc)
				}
			}
		})
	}
}
