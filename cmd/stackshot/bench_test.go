//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// BenchmarkDump runs the whole command (`stackshot --json PID`: capture,
// unwind, symbolize, print) against targets with 1, 16, 128 and 512 threads,
// blocked or spinning, in the default mode and in --mode stop; ns/op is the
// wall time of one dump, and the per-thread pause is reported from the
// JSON's pause_us. The same target is dumped by `eu-stack -p` (Debian's
// elfutils) and `gdb -batch -ex "thread apply all bt"` when installed, for
// comparison.
func BenchmarkDump(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	for _, kind := range []string{"blocked", "spin"} {
		for _, n := range []int{1, 16, 128, 512} {
			if kind == "spin" && n > 16 {
				continue // more spinners than cores measure the scheduler
			}
			b.Run(fmt.Sprintf("%s-%d", kind, n), func(b *testing.B) {
				args := []string{fmt.Sprint(n)}
				if kind == "spin" {
					args = append(args, "spin")
				}
				tg := testutil.Start(b, bin, args...)
				pid := fmt.Sprint(tg.PID)
				// The pstack-style text dump (default mode), and JSON (which
				// also loads the debug info for lines) in both modes, whose
				// pause_us gives the per-thread pauses.
				for _, run := range []struct {
					name string
					args []string
				}{
					{"stackshot-text", nil},
					{"stackshot-json-auto", []string{"--json"}},
					{"stackshot-json-stop", []string{"--json", "--mode", "stop"}},
				} {
					b.Run(run.name, func(b *testing.B) {
						var pauses []float64
						args := append(append([]string{}, run.args...), pid)
						for i := 0; i < b.N; i++ {
							out, err := exec.Command(stackshotBin, args...).Output()
							if err != nil {
								b.Fatal(err)
							}
							if run.args == nil {
								continue
							}
							b.StopTimer()
							var p jProc
							if err := json.Unmarshal(out, &p); err != nil {
								b.Fatal(err)
							}
							for _, th := range p.Threads {
								if th.Capture == "ptrace" {
									pauses = append(pauses, th.PauseUS)
								}
							}
							b.StartTimer()
						}
						if len(pauses) > 0 {
							sort.Float64s(pauses)
							b.ReportMetric(pauses[len(pauses)/2], "pause-med-us")
							b.ReportMetric(pauses[min(len(pauses)-1, len(pauses)*99/100)], "pause-p99-us")
						}
					})
				}
				if eu, err := exec.LookPath("eu-stack"); err == nil {
					b.Run("eu-stack", func(b *testing.B) {
						for i := 0; i < b.N; i++ {
							exec.Command(eu, "-p", pid).Run()
						}
					})
				}
				if gdb, err := exec.LookPath("gdb"); err == nil && n <= 128 {
					b.Run("gdb", func(b *testing.B) {
						for i := 0; i < b.N; i++ {
							exec.Command(gdb, "-q", "-batch", "-nx", "-p", pid, "-ex", "thread apply all bt").Run()
						}
					})
				}
			})
		}
	}
}

// BenchmarkDumpVsEuStack times the text dump (a fresh process each time:
// the pstack use) beside elfutils' eu-stack on the same
// target in the same run, the tools alternating so all see the same
// machine load. Targets: one thread, 16 and 512 threads blocked in
// pthread_cond_wait (testdata/targets/many.c), and one thread 1,000
// frames deep (testdata/realworld/deep.c). Variants: "plain" (`stackshot
// PID` against `eu-stack -n 0 -p PID`, and `eu-stack -q`, which prints no
// names at all) and "lines" (`stackshot -s -i` against `eu-stack -s -i`:
// file:line and inlined frames). "stackshot" runs with its cache filled
// (the second run of cron or a script), "stackshot-cold" with an empty
// cache directory each time (it pays the cache's writes too); ns/op is
// the warm stackshot's wall time; the
// custom metrics are each tool's median wall time (TOOL-ms) and CPU time
// (user+system, which a loaded machine disturbs less: TOOL-cpu-ms), and
// stackshot's median peak RSS (stackshot-maxrss-MiB).
// eu-stack's are absent where it is not installed. STACKSHOT_BASELINE=BIN
// adds another stackshot build (an older commit's) to the rotation as
// "baseline" (warm) and "baseline-cold": before and after measured in one
// run.
func BenchmarkDumpVsEuStack(b *testing.B) {
	many := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	deep := testutil.Build(b, "gcc", []string{testutil.Testdata("realworld", "deep.c")}, "-O0", "-g")
	eu, euErr := exec.LookPath("eu-stack")
	baseline := os.Getenv("STACKSHOT_BASELINE")
	type tool = cacheTool
	cacheDir := b.TempDir()
	for _, c := range []struct {
		name string
		bin  string
		arg  string
	}{
		{"threads-1", many, "1"},
		{"threads-16", many, "16"},
		{"threads-128", many, "128"},
		{"threads-512", many, "512"},
		{"deep-1000", deep, "1000"},
	} {
		b.Run(c.name, func(b *testing.B) {
			tg := testutil.Start(b, c.bin, c.arg)
			pid := fmt.Sprint(tg.PID)
			for _, v := range []struct {
				name  string
				flags []string // stackshot's and eu-stack's alike
			}{{"plain", nil}, {"lines", []string{"-s", "-i"}}} {
				b.Run(v.name, func(b *testing.B) {
					// eu-stack -n 0: all frames, as stackshot shows (up to 1024).
					ssArgs := append(append([]string{}, v.flags...), pid)
					tools := []tool{{"stackshot", stackshotBin, ssArgs, false}, {"stackshot-cold", stackshotBin, ssArgs, true},
						{"stackshot-nocache", stackshotBin, append([]string{"--no-cache"}, ssArgs...), false}}
					if euErr == nil {
						tools = append(tools, tool{"eu-stack", eu, append(append([]string{"-n", "0"}, v.flags...), "-p", pid), false})
						if v.flags == nil {
							tools = append(tools, tool{"eu-stack-q", eu, []string{"-q", "-n", "0", "-p", pid}, false})
						}
					}
					if baseline != "" {
						tools = append(tools, tool{"baseline", baseline, append(append([]string{}, v.flags...), pid), false},
							tool{"baseline-cold", baseline, append(append([]string{}, v.flags...), pid), true})
					}
					// "stackshot" runs warm (cron's second run): one run
					// first fills the cache.
					if err := exec.Command(stackshotBin, ssArgs...).Run(); err != nil {
						b.Fatal(err)
					}
					wall := make([][]float64, len(tools))
					cpu := make([][]float64, len(tools))
					rss := make([][]float64, len(tools))
					for i := 0; i < b.N; i++ {
						for k, tl := range tools {
							if k > 0 {
								b.StopTimer()
							}
							cmd := tl.command(b, cacheDir)
							start := time.Now()
							if err := cmd.Run(); err != nil {
								b.Fatalf("%s %v: %v", tl.bin, tl.args, err)
							}
							wall[k] = append(wall[k], float64(time.Since(start).Microseconds())/1000)
							ps := cmd.ProcessState
							cpu[k] = append(cpu[k], float64((ps.UserTime()+ps.SystemTime()).Microseconds())/1000)
							if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
								rss[k] = append(rss[k], float64(ru.Maxrss)/1024) // KiB -> MiB
							}
							if k > 0 {
								b.StartTimer()
							}
						}
					}
					for k, tl := range tools {
						b.ReportMetric(median(wall[k]), tl.name+"-ms")
						b.ReportMetric(median(cpu[k]), tl.name+"-cpu-ms")
						if k == 0 {
							b.ReportMetric(median(rss[k]), tl.name+"-maxrss-MiB")
						}
					}
				})
			}
		})
	}
}

// median returns the median of v (sorting it), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// cacheTool is a command a benchmark times; cold runs it with an empty
// cache directory each time, else it shares dir (warm).
type cacheTool struct {
	name string
	bin  string
	args []string
	cold bool
}

func (tl cacheTool) command(b *testing.B, dir string) *exec.Cmd {
	cmd := exec.Command(tl.bin, tl.args...)
	cmd.Env = append(os.Environ(), "STACKSHOT_CACHE_DIR="+dir)
	if tl.cold {
		d, err := os.MkdirTemp(dir, "cold")
		if err != nil {
			b.Fatal(err)
		}
		cmd.Env = append(os.Environ(), "STACKSHOT_CACHE_DIR="+filepath.Join(d, "c"))
	}
	return cmd
}

// BenchmarkSymbolizeVsTools resolves 10,000 addresses (`symbolize -a -e
// FILE`, addresses on stdin) beside `addr2line -a -f -i -C -e FILE` and
// `llvm-symbolizer --obj FILE` (when installed) in one run, the tools
// alternating: glibc through its separate debug file (libc6-dbg), the
// Go toolchain's go binary, and a large C++ library through its debug
// file (libcephfs2-dbg: 57 MB of DWARF once decompressed). Addresses are
// spread over the functions nm lists: of the dynamic symbols for glibc,
// of the whole symbol table for go, and of the debug file's whole symbol
// table for libcephfs (3,502 functions; it exports only 203), the i-th
// address funcs[i*7919 % n] + i%13. stackshot runs warm (its cache filled by a first run), cold (an
// empty cache directory each time) and with --no-cache; metrics are each
// tool's median wall and CPU ms. STACKSHOT_BASELINE=BIN adds another
// build, cold and with --no-cache, to the rotation.
func BenchmarkSymbolizeVsTools(b *testing.B) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	cephfs := "/usr/lib/x86_64-linux-gnu/libcephfs.so.2"
	if real, err := filepath.EvalSymlinks(cephfs); err == nil {
		cephfs = real // (a symlink: builds before 2026-12 refused one)
	}
	for _, in := range []struct{ name, file, nmFlag string }{{"glibc", libc, "-D"}, {"go", goBin, ""}, {"cephfs", cephfs, "debug"}} {
		b.Run(in.name, func(b *testing.B) {
			if _, err := os.Stat(in.file); err != nil {
				b.Skipf("no %s: %v", in.file, err)
			}
			nmFile, nmFlag := in.file, in.nmFlag
			if nmFlag == "debug" {
				// The debug file's symbol table, by build id.
				id := gnuBuildID(b, in.file)
				nmFile = filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
				if _, err := os.Stat(nmFile); err != nil {
					b.Skipf("no debug file for %s: %v", in.file, err)
				}
				nmFlag = ""
			}
			nmArgs := []string{"--defined-only", nmFile}
			if nmFlag != "" {
				nmArgs = append([]string{nmFlag}, nmArgs...)
			}
			out, err := exec.Command("nm", nmArgs...).Output()
			if err != nil {
				b.Fatal(err)
			}
			var funcs []uint64
			for _, l := range strings.Split(string(out), "\n") {
				f := strings.Fields(l)
				if len(f) == 3 && (f[1] == "T" || f[1] == "t") {
					if a, err := strconv.ParseUint(f[0], 16, 64); err == nil {
						funcs = append(funcs, a)
					}
				}
			}
			if len(funcs) == 0 {
				b.Fatalf("nm lists no function in %s", nmFile)
			}
			var input strings.Builder
			for i := 0; i < 10000; i++ {
				fmt.Fprintf(&input, "%#x\n", funcs[i*7919%len(funcs)]+uint64(i%13))
			}
			cacheDir := b.TempDir()
			ss := []string{"symbolize", "-a", "-e", in.file}
			tools := []cacheTool{{"stackshot", stackshotBin, ss, false}, {"stackshot-cold", stackshotBin, ss, true},
				{"stackshot-nocache", stackshotBin, append(append([]string{}, ss...), "--no-cache"), false}}
			if baseline := os.Getenv("STACKSHOT_BASELINE"); baseline != "" {
				tools = append(tools, cacheTool{"baseline-cold", baseline, ss, true},
					cacheTool{"baseline-nocache", baseline, append(append([]string{}, ss...), "--no-cache"), false})
			}
			if p, err := exec.LookPath("addr2line"); err == nil {
				tools = append(tools, cacheTool{"addr2line", p, []string{"-a", "-f", "-i", "-C", "-e", in.file}, false})
			}
			if p, err := exec.LookPath("llvm-symbolizer"); err == nil {
				tools = append(tools, cacheTool{"llvm-symbolizer", p, []string{"--obj", in.file}, false})
			}
			warm := tools[0].command(b, cacheDir)
			warm.Stdin = strings.NewReader(input.String())
			if err := warm.Run(); err != nil {
				b.Fatal(err)
			}
			wall := make([][]float64, len(tools))
			cpu := make([][]float64, len(tools))
			for i := 0; i < b.N; i++ {
				for k, tl := range tools {
					if k > 0 {
						b.StopTimer()
					}
					cmd := tl.command(b, cacheDir)
					cmd.Stdin = strings.NewReader(input.String())
					start := time.Now()
					if err := cmd.Run(); err != nil {
						b.Fatalf("%s %v: %v", tl.bin, tl.args, err)
					}
					wall[k] = append(wall[k], float64(time.Since(start).Microseconds())/1000)
					ps := cmd.ProcessState
					cpu[k] = append(cpu[k], float64((ps.UserTime()+ps.SystemTime()).Microseconds())/1000)
					if k > 0 {
						b.StartTimer()
					}
				}
			}
			for k, tl := range tools {
				b.ReportMetric(median(wall[k]), tl.name+"-ms")
				b.ReportMetric(median(cpu[k]), tl.name+"-cpu-ms")
			}
		})
	}
}
