//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

type jGoProc struct {
	Runtime *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"runtime"`
	Goroutines      *[]jGoroutine `json:"goroutines"`
	GoroutineGroups []struct {
		Count  int      `json:"count"`
		GoIDs  []uint64 `json:"goids"`
		Frames []jFrame `json:"frames"`
	} `json:"goroutine_groups"`
	Warnings []string `json:"warnings"`
}

type jGoroutine struct {
	GoID       uint64   `json:"goid"`
	Status     string   `json:"status"`
	WaitReason *string  `json:"wait_reason"`
	WaitingS   *float64 `json:"waiting_s"`
	TID        *int     `json:"tid"`
	Frames     []jFrame `json:"frames"`
	CreatedBy  *struct {
		Function string  `json:"function"`
		GoID     *uint64 `json:"goid"`
		File     string  `json:"file"`
		Line     int     `json:"line"`
	} `json:"created_by"`
}

func goDumpJSON(t *testing.T, args ...string) (jGoProc, string) {
	t.Helper()
	out, errOut, code := runSS(t, append([]string{"dump", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("stackshot %v: exit %d\n%s", args, code, errOut)
	}
	var p jGoProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	return p, out
}

// sourceLine returns the line number of the first source line of the
// goroutines target that contains s.
func sourceLine(t *testing.T, s string) int {
	b, err := os.ReadFile(testutil.Testdata("goruntime", "goroutines", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("no %q in the target's source", s)
	return 0
}

// TestDumpGoroutines: dump's JSON and text show the goroutines of a Go
// program (stripped and PIE-cgo-external too) as the contract says, with
// names and lines from the resolver, the creator's position and goid.
func TestDumpGoroutines(t *testing.T) {
	have, _ := testutil.GoToolchains()
	tc := have[0]
	for _, v := range []struct {
		name  string
		env   []string
		flags []string
	}{
		{"plain", []string{"CGO_ENABLED=0"}, nil},
		{"pie-cgo-external-stripped", []string{"CGO_ENABLED=1"}, []string{"-buildmode=pie", "-ldflags=-linkmode=external -s -w"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			if v.env[0] == "CGO_ENABLED=1" {
				testutil.Need(t, "gcc")
			}
			bin := testutil.BuildGo(t, tc, testutil.Testdata("goruntime", "goroutines"), v.env, v.flags...)
			tg := testutil.Start(t, bin)
			pid := fmt.Sprint(tg.PID)
			p, _ := goDumpJSON(t, pid)
			if p.Runtime == nil || p.Runtime.Name != "go" || testutil.Release(p.Runtime.Version) != tc.Name {
				t.Fatalf("runtime %+v, want go %s", p.Runtime, tc.Name)
			}
			if p.Goroutines == nil {
				t.Fatalf("goroutines null; warnings %v", p.Warnings)
			}
			goLine := sourceLine(t, "go level1()")
			found := false
			for _, g := range *p.Goroutines {
				var chain []string
				for _, f := range g.Frames {
					if f.Function != nil && strings.HasPrefix(*f.Function, "main.") {
						chain = append(chain, *f.Function)
					}
					if f.Method != "pclntab" && g.Status != "running" {
						t.Errorf("goroutine %d frame method %q", g.GoID, f.Method)
					}
				}
				if strings.Join(chain, " < ") != "main.level3 < main.level2 < main.level1" {
					continue
				}
				found = true
				if g.Status != "waiting" || g.WaitReason == nil || *g.WaitReason != "chan receive" || g.TID != nil {
					t.Errorf("level3 goroutine: status %q reason %v tid %v", g.Status, g.WaitReason, g.TID)
				}
				f0 := g.Frames[0]
				if f0.Fn() != "runtime.gopark" || !strings.HasSuffix(f0.File, ".go") || f0.Line == 0 {
					t.Errorf("innermost frame %s at %s:%d", f0.Fn(), f0.File, f0.Line)
				}
				c := g.CreatedBy
				if c == nil || c.Function != "main.main" || c.GoID == nil || *c.GoID != 1 ||
					!strings.HasSuffix(c.File, "goroutines/main.go") || c.Line != goLine {
					t.Errorf("created_by %+v, want main.main in goroutine 1 at main.go:%d", c, goLine)
				}
			}
			if !found {
				t.Errorf("no goroutine main.level3 < level2 < level1 in %d goroutines", len(*p.Goroutines))
			}
			// Text: the summary and the runtime's header style.
			out, errOut, code := runSS(t, "dump", pid)
			if code != 0 {
				t.Fatalf("text dump: exit %d: %s", code, errOut)
			}
			// The verdict names the goroutine blocked on a Go mutex (main
			// holds it): the runtime records no owner, the wait is said.
			if want := "; 1 goroutine waits for sync.Mutex.Lock (1 in main.locker)"; !strings.Contains(strings.SplitN(out, "\n", 3)[1], want) {
				t.Errorf("verdict line %q lacks %q", strings.SplitN(out, "\n", 3)[1], want)
			}
			if !regexp.MustCompile(`(?m)^Go 1\.\d+(\.\d+)?: \d+ goroutines \(\d+ on threads, (\d+ runnable, )?\d+ waiting\)$`).MatchString(out) {
				t.Errorf("no goroutine summary line in:\n%s", out)
			}
			if !regexp.MustCompile(`(?m)^goroutine \d+ \[chan receive\]:\n#0 +0x[0-9a-f]+ in runtime.gopark at `).MatchString(out) {
				t.Errorf("no chan receive goroutine in:\n%s", out)
			}
			if !strings.Contains(out, fmt.Sprintf("created by main.main in goroutine 1 at %s:%d\n",
				testutil.Testdata("goruntime", "goroutines", "main.go"), goLine)) {
				t.Errorf("no created-by line for main.go:%d in:\n%s", goLine, out)
			}
			// --no-goroutines: none; --group: one group per stack.
			if out, _, _ := runSS(t, "dump", "--json", "--no-goroutines", pid); strings.Contains(out, `"goroutines"`) {
				t.Errorf("--no-goroutines still lists goroutines")
			}
		})
	}
}

// TestDumpNotGo: a C program has no runtime and no goroutines key.
func TestDumpNotGo(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "1")
	_, out := goDumpJSON(t, fmt.Sprint(tg.PID))
	if strings.Contains(out, `"runtime"`) || strings.Contains(out, `"goroutines"`) {
		t.Errorf("a C program's JSON has Go keys")
	}
}

// TestDumpManyGoroutinesGroup: past 256 goroutines, identical stacks fold
// into groups (text and JSON), while the JSON list stays complete.
func TestDumpManyGoroutinesGroup(t *testing.T) {
	have, _ := testutil.GoToolchains()
	bin := testutil.BuildGo(t, have[0], testutil.Testdata("goruntime", "goroutines"), []string{"CGO_ENABLED=0"})
	tg := testutil.Start(t, bin, "-park", "1000")
	p, _ := goDumpJSON(t, fmt.Sprint(tg.PID))
	if p.Goroutines == nil || len(*p.Goroutines) < 1000 {
		t.Fatalf("goroutines: %v", p.Goroutines)
	}
	if len(p.GoroutineGroups) == 0 || p.GoroutineGroups[0].Count != 1000 || len(p.GoroutineGroups[0].GoIDs) != 1000 {
		t.Fatalf("largest group: %+v", p.GoroutineGroups)
	}
	var chain []string
	for _, f := range p.GoroutineGroups[0].Frames {
		if strings.HasPrefix(f.Fn(), "main.") {
			chain = append(chain, f.Fn())
		}
	}
	if strings.Join(chain, " ") != "main.parked" {
		t.Errorf("largest group's stack %v", chain)
	}
	out, _, _ := runSS(t, "dump", fmt.Sprint(tg.PID))
	if !regexp.MustCompile(`(?m)^1000 goroutines \[chan receive\]: \d+, \d+, .*\(\d+ more\)$`).MatchString(out) {
		t.Errorf("no group header for 1000 goroutines in text")
	}
}

// TestDumpGoroutinesRunningAndWaiting: a spinning goroutine is shown
// running, on its thread, with that thread's frames; after a garbage
// collection the runtime records since when goroutines wait, and
// waiting_s is measured against the same clock (CLOCK_MONOTONIC).
func TestDumpGoroutinesRunningAndWaiting(t *testing.T) {
	have, _ := testutil.GoToolchains()
	bin := testutil.BuildGo(t, have[0], testutil.Testdata("goruntime", "goroutines"), []string{"CGO_ENABLED=0"})
	start := time.Now()
	tg := testutil.Start(t, bin)
	// (The runtime notes since when a goroutine waits when a collection
	// finds it waiting; one collection right after the start may not.)
	for _, c := range []string{"spin", "gc", "gc"} {
		if a := tg.Ask(c); a != "ok" {
			t.Fatalf("%s: %s", c, a)
		}
	}
	time.Sleep(300 * time.Millisecond)
	p, _ := goDumpJSON(t, fmt.Sprint(tg.PID))
	age := time.Since(start).Seconds()
	spinner, waited := false, false
	for _, g := range *p.Goroutines {
		var names []string
		for _, f := range g.Frames {
			names = append(names, f.Fn())
		}
		// The spinner: running (its thread's frames, when the thread
		// was running it at its capture) or preempted (runnable).
		hasSpinner := strings.Contains(" "+strings.Join(names, " ")+" ", " main.spinner ")
		if g.Status == "running" && g.GoID != 1 {
			if g.TID == nil || *g.TID <= 0 {
				t.Errorf("running goroutine %d without a thread", g.GoID)
			}
			if len(names) > 0 && !hasSpinner {
				t.Errorf("running goroutine %d: %v", g.GoID, names)
			}
			spinner = true
		} else if hasSpinner {
			if g.Status != "runnable" {
				t.Errorf("spinner status %q", g.Status)
			}
			spinner = true
		}
		if g.WaitReason != nil && *g.WaitReason == "chan receive" {
			if g.WaitingS == nil {
				t.Errorf("goroutine %d: no waiting_s after a GC", g.GoID)
			} else if *g.WaitingS < 0 || *g.WaitingS > age {
				t.Errorf("goroutine %d: waiting %.3fs, the target is %.3fs old", g.GoID, *g.WaitingS, age)
			} else {
				waited = true
			}
		}
	}
	if !spinner {
		for _, g := range *p.Goroutines {
			var names []string
			for _, f := range g.Frames {
				names = append(names, f.Fn())
			}
			t.Logf("goroutine %d [%s] tid %v: %v", g.GoID, g.Status, g.TID, names)
		}
		t.Errorf("no main.spinner goroutine")
	}
	if !waited {
		t.Errorf("no chan receive goroutine with waiting_s")
	}
}

// TestReportGoSaysNoGoroutines: a saved capture or core of a Go program
// is reported with its threads; its goroutines are not read from it, and
// the report says so (runtime go, goroutines null, a warning), never
// leaves them out silently.
func TestReportGoSaysNoGoroutines(t *testing.T) {
	have, _ := testutil.GoToolchains()
	bin := testutil.BuildGo(t, have[0], testutil.Testdata("goruntime", "goroutines"), []string{"CGO_ENABLED=0"})
	tg := testutil.Start(t, bin)
	for _, name := range []string{"go.cap", "go.core"} {
		file := t.TempDir() + "/" + name
		if _, errOut, code := runSS(t, "capture", fmt.Sprint(tg.PID), "-o", file); code != 0 {
			t.Fatalf("capture: exit %d: %s", code, errOut)
		}
		out, errOut, code := runSS(t, "report", "--json", file)
		if code != 0 {
			t.Fatalf("report %s: exit %d: %s", name, code, errOut)
		}
		var p jGoProc
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		if p.Runtime == nil || p.Runtime.Name != "go" || p.Goroutines != nil {
			t.Errorf("%s: runtime %+v, goroutines %v", name, p.Runtime, p.Goroutines)
		}
		if !strings.Contains(strings.Join(p.Warnings, "\n"), "goroutines not read: they are read from a live Go program only") {
			t.Errorf("%s: warnings %q", name, p.Warnings)
		}
		if out, _, _ := runSS(t, "report", file); !strings.Contains(out, "\nGo program: goroutines not read\n") {
			t.Errorf("%s: text:\n%s", name, out)
		}
	}
	// A C program's capture has no runtime.
	c := testutil.Start(t, testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread"), "1")
	file := t.TempDir() + "/c.cap"
	if _, errOut, code := runSS(t, "capture", fmt.Sprint(c.PID), "-o", file); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errOut)
	}
	if out, _, _ := runSS(t, "report", "--json", file); strings.Contains(out, `"runtime"`) {
		t.Errorf("a C program's report has a runtime")
	}
}
