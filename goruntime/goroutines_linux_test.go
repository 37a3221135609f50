//go:build linux

package goruntime_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stackshot/goruntime"
	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
)

// variant is one way Go programs are built.
type variant struct {
	name  string
	env   []string
	flags []string
	cc    bool // needs a C toolchain
}

var variants = []variant{
	{name: "plain", env: []string{"CGO_ENABLED=0"}},
	{name: "stripped", env: []string{"CGO_ENABLED=0"}, flags: []string{"-ldflags=-s -w"}},
	// The Debian recipe: PIE, cgo, external linking, stripped.
	{name: "pie-cgo-external-stripped", env: []string{"CGO_ENABLED=1"}, flags: []string{"-buildmode=pie", "-ldflags=-linkmode=external -s -w"}, cc: true},
	// cgo, linked statically by the C linker, stripped.
	{name: "static-cgo-external-stripped", env: []string{"CGO_ENABLED=1"}, flags: []string{"-ldflags=-linkmode=external -extldflags=-static -s -w"}, cc: true},
}

// oracleGoroutine is one goroutine of runtime.Stack(buf, true).
type oracleGoroutine struct {
	id     uint64
	status string   // "chan receive" (the bracket's first part)
	funcs  []string // physical frames (not "(...)" inlined ones)
}

// parseStack parses the runtime's traceback text.
func parseStack(t *testing.T, text string) map[uint64]*oracleGoroutine {
	out := map[uint64]*oracleGoroutine{}
	var cur *oracleGoroutine
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "goroutine "):
			f := strings.SplitN(line, " ", 3)
			id, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil || len(f) < 3 {
				t.Fatalf("bad header %q", line)
			}
			st := strings.TrimSuffix(strings.TrimPrefix(f[2], "["), "]:")
			if i := strings.Index(st, ", "); i >= 0 {
				st = st[:i]
			}
			cur = &oracleGoroutine{id: id, status: st}
			out[id] = cur
		case cur == nil || line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by "):
		default:
			if strings.HasSuffix(line, "(...)") {
				continue // inlined
			}
			i := strings.LastIndex(line, "(")
			if i <= 0 {
				t.Fatalf("bad frame line %q", line)
			}
			cur.funcs = append(cur.funcs, line[:i])
		}
	}
	return out
}

// shown is the runtime's showframe for a traceback of another goroutine:
// runtime functions are hidden unless exported.
func shown(name string) bool {
	if !strings.HasPrefix(name, "runtime.") {
		return strings.Contains(name, ".")
	}
	r := name[len("runtime."):]
	return len(r) > 0 && r[0] >= 'A' && r[0] <= 'Z'
}

func openTarget(t *testing.T, pid int, bin string) *goruntime.Runtime {
	t.Helper()
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	var bias uint64
	found := false
	for _, m := range maps {
		if m.Path == bin && m.Offset == 0 {
			bias, found = goruntime.LoadBias(f, m.Start, m.Offset)
			break
		}
	}
	if !found {
		t.Fatalf("no mapping of %s in pid %d", bin, pid)
	}
	rt, err := goruntime.Open(goruntime.Target{Mem: ptrace.MemReader{PID: pid}, Exe: f, Bias: bias})
	if err != nil {
		t.Fatalf("opening the Go runtime of pid %d: %v", pid, err)
	}
	return rt
}

func toolchainVariants(t *testing.T, fn func(t *testing.T, tc testutil.GoToolchain, v variant)) {
	have, missing := testutil.GoToolchains()
	for _, m := range missing {
		t.Run(strings.Fields(m)[0], func(t *testing.T) { testutil.Skip(t, m+" is not available on this machine") })
	}
	for _, tc := range have {
		for _, v := range variants {
			if tc.Extra && v.name != "stripped" {
				continue // other releases: the table's entry, stripped only
			}
			t.Run(tc.Name+"/"+v.name, func(t *testing.T) {
				if v.cc {
					testutil.Need(t, "gcc")
				}
				fn(t, tc, v)
			})
		}
	}
}

// TestGoroutinesMatchRuntime: the goroutine list read from outside equals
// the program's own runtime.Stack(all) for every goroutine that did not
// move in between: ids, statuses and wait reasons, function sequences.
func TestGoroutinesMatchRuntime(t *testing.T) {
	toolchainVariants(t, func(t *testing.T, tc testutil.GoToolchain, v variant) {
		bin := testutil.BuildGo(t, tc, testutil.Testdata("goruntime", "goroutines"), v.env, v.flags...)
		tg := testutil.Start(t, bin)
		file := filepath.Join(t.TempDir(), "stack.txt")
		if a := tg.Ask("stack " + file); a != "ok" {
			t.Fatalf("target: %s", a)
		}
		rt := openTarget(t, tg.PID, bin)
		if want := goruntime.Release(rt.Version); want != tc.Name {
			t.Fatalf("version %s, toolchain %s", rt.Version, tc.Name)
		}
		if v.name == "plain" && rt.LayoutFrom != "dwarf" {
			t.Errorf("layout from %s, not from the binary's DWARF (%v)", rt.LayoutFrom, rt.DWARFErr)
		}
		snap, err := rt.Goroutines()
		if err != nil {
			t.Fatal(err)
		}
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		oracle := parseStack(t, string(text))
		got := map[uint64]goruntime.Goroutine{}
		for _, g := range snap.Goroutines {
			got[g.ID] = g
		}
		t.Logf("%s %s (layout from %s): %d goroutines, %d skipped, %d runtime ones; oracle %d",
			rt.Version, v.name, rt.LayoutFrom, len(snap.Goroutines), snap.Skipped, snap.System, len(oracle))
		// Only the goroutine that answered us moves (it may be caught
		// between states, and skipped): the parked ones must all be read.
		moving := 0
		for _, o := range oracle {
			if o.status == "running" || o.status == "syscall" {
				moving++
			}
		}
		if snap.Skipped > moving {
			t.Errorf("%d goroutines skipped, %d could be moving: %v", snap.Skipped, moving, snap.SkipReasons)
		}
		// Every goroutine the runtime listed, we list; parked ones match.
		for id, o := range oracle {
			g, ok := got[id]
			if !ok && (o.status == "running" || o.status == "syscall") && snap.Skipped > 0 {
				continue
			}
			if !ok {
				t.Errorf("goroutine %d [%s] %v: not read", id, o.status, o.funcs)
				continue
			}
			if o.status == "running" || o.status == "syscall" || g.OnThread() {
				continue // it moved (the main goroutine answered us)
			}
			status := g.Status
			if g.WaitReason != "" {
				status = g.WaitReason
			}
			var funcs []string
			for _, f := range g.ShownFuncs() {
				if shown(f) {
					funcs = append(funcs, f)
				}
			}
			if status != o.status || strings.Join(funcs, " < ") != strings.Join(o.funcs, " < ") {
				t.Errorf("goroutine %d:\n got  [%s] %s\n want [%s] %s", id, status, strings.Join(funcs, " < "), o.status, strings.Join(o.funcs, " < "))
			}
		}
		for id := range got {
			if _, ok := oracle[id]; !ok {
				t.Errorf("goroutine %d read but not in runtime.Stack", id)
			}
		}
		// The known ones are there, as written.
		wantChains := map[string]string{
			"main.level3 < main.level2 < main.level1": "chan receive",
			"main.selector": "select",
			"main.sleeper":  "sleep",
			"main.waiter":   "",
			"main.locker":   "",
			"main.acceptor": "IO wait",
		}
		for chain, reason := range wantChains {
			found := false
			for _, g := range snap.Goroutines {
				var fs []string
				for _, f := range g.ShownFuncs() {
					if strings.HasPrefix(f, "main.") {
						fs = append(fs, f)
					}
				}
				if strings.Join(fs, " < ") == chain {
					found = true
					if reason != "" && g.WaitReason != reason {
						t.Errorf("%s: wait reason %q, want %q", chain, g.WaitReason, reason)
					}
					if g.GoPC == 0 || g.Funcs[len(g.Funcs)-1] != "runtime.goexit" {
						t.Errorf("%s: gopc %#x, root %s", chain, g.GoPC, g.Funcs[len(g.Funcs)-1])
					}
				}
			}
			if !found {
				t.Errorf("no goroutine %s", chain)
			}
		}
	})
}

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("go"); err != nil {
		fmt.Fprintln(os.Stderr, "go not on PATH")
	}
	os.Exit(m.Run())
}
