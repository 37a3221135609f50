//go:build linux

package pyruntime

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
)

// openMany opens the Python runtime of many.py, 50 threads 10 calls deep
// in time.sleep, under Debian's CPython 3.11.
func openMany(b *testing.B) *Runtime {
	py := testutil.Need(b, "/usr/bin/python3.11")
	tg := testutil.Start(b, py, testutil.Testdata("python", "many.py"), "50")
	maps, err := procmaps.ReadMaps(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	rt, err := OpenLive(tg.PID, Candidates(py, maps, nil), ptrace.MemReader{PID: tg.PID})
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

// BenchmarkLiveThreads: what reading a 50-thread CPython 3.11 process's
// Python frames costs (each thread 10 calls deep, in time.sleep), the
// part of a dump --no-python leaves out besides the placing.
func BenchmarkLiveThreads(b *testing.B) {
	rt := openMany(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ths, err := rt.Threads()
		if err != nil || len(ths) != 50 {
			b.Fatalf("%d threads, %v", len(ths), err)
		}
	}
}

// BenchmarkLiveNames: what reading the threading names of the same
// 50-thread process costs (sys.modules, threading._active and 50 Thread
// objects' attributes), beside BenchmarkLiveThreads' frames.
func BenchmarkLiveNames(b *testing.B) {
	rt := openMany(b)
	ths, err := rt.Threads()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := rt.Names(ths); err != nil || ths[0].Name == "" {
			b.Fatalf("%q, %v", ths[0].Name, err)
		}
	}
}

// TestDebugOffsetsAgree: a live CPython 3.13 describes its structures
// (_Py_DebugOffsets at the start of _PyRuntime), and every offset it
// gives is the one the table generated from 3.13's headers has; Open
// uses the runtime's own account, and reads the process's frames by it.
func TestDebugOffsetsAgree(t *testing.T) {
	root, err := exec.Command("pyenv", "root").Output()
	if err != nil {
		testutil.Skip(t, "pyenv is not installed on this machine (its CPython 3.13 is what this test reads)")
	}
	found, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(root)), "versions", "3.13.*", "bin", "python3.13"))
	if len(found) == 0 {
		testutil.Skip(t, "no CPython 3.13 under $(pyenv root)/versions")
	}
	py := found[len(found)-1]
	tg := testutil.Start(t, py, testutil.Testdata("python", "embed.py"))
	maps, err := procmaps.ReadMaps(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := OpenLive(tg.PID, Candidates(py, maps, nil), ptrace.MemReader{PID: tg.PID})
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Described {
		t.Fatalf("CPython %s: no _Py_DebugOffsets found", rt.Version)
	}
	if table := layoutFor(13); *rt.Layout != *table {
		t.Errorf("_Py_DebugOffsets and the generated table disagree:\n runtime %+v\n table   %+v", *rt.Layout, *table)
	}
	threads, err := rt.Threads()
	if err != nil || len(threads) != 1 || len(threads[0].Frames) != 2 || threads[0].Frames[0].Name != "wait_here" {
		t.Errorf("threads read by the runtime's offsets: %+v, %v; want one, in wait_here", threads, err)
	}
}

// livePythons are the CPython interpreters here: Debian's 3.11 (and its
// debug build), and each 3.8-3.13 under $(pyenv root)/versions.
func livePythons() map[string]string {
	out := map[string]string{"debian-3.11": "/usr/bin/python3.11", "debian-3.11-dbg": "/usr/bin/python3.11-dbg"}
	root, _ := exec.Command("pyenv", "root").Output()
	for minor := 8; minor <= 13; minor++ {
		v := fmt.Sprintf("3.%d", minor)
		path := "(no pyenv)"
		if len(root) > 0 {
			path = filepath.Join(strings.TrimSpace(string(root)), "versions", v+".*", "bin", "python"+v)
			if m, _ := filepath.Glob(path); len(m) > 0 {
				path = m[len(m)-1]
			}
		}
		out["pyenv-"+v] = path
	}
	return out
}

// TestLiveNames runs scenes.py under each CPython here, which names its
// threads (non-ASCII names, a control character, one renamed once
// started) and prints each one's threading name by native id: Names
// reads the same ones, for every thread, MainThread included.
func TestLiveNames(t *testing.T) {
	for name, py := range livePythons() {
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(py); err != nil {
				testutil.Skip(t, py+" is not installed on this machine")
			}
			tg := testutil.Start(t, py, testutil.Testdata("python", "scenes.py"))
			var want struct {
				PyNames map[string]string `json:"pynames"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(tg.Ready, "ready ")), &want); err != nil {
				t.Fatalf("scenes.py's ready line: %v", err)
			}
			pm, err := procmaps.ReadMaps(tg.PID)
			if err != nil {
				t.Fatal(err)
			}
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", tg.PID)) // (python3.11-dbg is a link)
			rt, err := OpenLive(tg.PID, Candidates(exe, pm, nil), ptrace.MemReader{PID: tg.PID})
			if err != nil {
				t.Fatal(err)
			}
			threads, err := rt.Threads()
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Names(threads); err != nil {
				t.Fatalf("CPython %s: %v", rt.Version, err)
			}
			rt.MatchTIDs(threads, procmaps.TaskSet(tg.PID))
			got := map[string]string{}
			for _, th := range threads {
				if th.Name != "" {
					got[strconv.Itoa(th.NativeID)] = th.Name
				}
			}
			if !maps.Equal(got, want.PyNames) {
				t.Errorf("CPython %s: names by tid\n got  %q\n want %q", rt.Version, got, want.PyNames)
			}
		})
	}
}
