package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"stackshot/report"
)

func goProcess() *report.Process {
	fr := []report.Frame{
		{PC: 0x49a1f3, Kind: "user", Function: "main.accLevel3", Offset: 0x13, HasOffset: true, Module: "/src/app/app",
			ModuleOffset: 0x9a1f3, HasModule: true, File: "/src/app/main.go", Line: 17, Method: "pclntab"},
		{PC: 0x49a25c, Kind: "user", Function: "main.accLevel2", Module: "/src/app/app", ModuleOffset: 0x9a25c,
			HasModule: true, File: "/src/app/main.go", Line: 23, Method: "pclntab"},
	}
	return &report.Process{PID: 42, Comm: "app", Exe: "/src/app/app", Time: time.Unix(0, 0), State: "S",
		Runtime: &report.Runtime{Name: "go", Version: "go1.26.8"},
		Goroutines: []report.Goroutine{
			{GoID: 1, Status: "syscall", TID: 42, Frames: fr[1:]},
			{GoID: 18, Status: "waiting", WaitReason: "chan receive", WaitingNS: 720e9, HasWaiting: true, Frames: fr,
				CreatedBy: &report.CreatedBy{Function: "main.main", GoID: 1, HasGoID: true, File: "/src/app/main.go", Line: 40}},
		}}
}

func TestTextGoroutines(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, []*report.Process{goProcess()}, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `
Go 1.26.8: 2 goroutines (1 on threads, 1 waiting)

goroutine 1 [syscall] on thread 42:
#0   0x000000000049a25c in main.accLevel2 at /src/app/main.go:23 (app+0x9a25c)

goroutine 18 [chan receive, 12 minutes]:
#0   0x000000000049a1f3 in main.accLevel3 at /src/app/main.go:17 (app+0x9a1f3)
#1   0x000000000049a25c in main.accLevel2 at /src/app/main.go:23 (app+0x9a25c)
created by main.main in goroutine 1 at /src/app/main.go:40
`
	if got := b.String(); !strings.HasSuffix(got, want) {
		t.Errorf("text:\n%s\nwant it to end with:\n%s", got, want)
	}
	// Runnable goroutines wait for a thread, not for an event: counted
	// apart from the waiting ones.
	p := goProcess()
	p.Goroutines = append(p.Goroutines, report.Goroutine{GoID: 19, Status: "runnable", Frames: p.Goroutines[1].Frames},
		report.Goroutine{GoID: 20, Status: "preempted", Frames: p.Goroutines[1].Frames})
	b.Reset()
	Text(&b, []*report.Process{p}, TextOptions{})
	if !strings.Contains(b.String(), "\nGo 1.26.8: 4 goroutines (1 on threads, 2 runnable, 1 waiting)\n") {
		t.Errorf("with runnable goroutines:\n%s", b.String())
	}
	// Grouped: one group per stack, ids listed.
	p = goProcess()
	p.GoroutineGroups = report.GroupGoroutines(p.Goroutines)
	b.Reset()
	Text(&b, []*report.Process{p}, TextOptions{})
	if !strings.Contains(b.String(), "\n1 goroutine [chan receive]: 18\n#0  ") {
		t.Errorf("grouped text:\n%s", b.String())
	}
}

func TestJSONGoroutines(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, []*report.Process{goProcess()}); err != nil {
		t.Fatal(err)
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if got := string(p["runtime"]); strings.Join(strings.Fields(got), "") != `{"name":"go","version":"go1.26.8"}` {
		t.Errorf("runtime %s", got)
	}
	var gs []map[string]any
	if err := json.Unmarshal(p["goroutines"], &gs); err != nil || len(gs) != 2 {
		t.Fatalf("goroutines %s: %v", p["goroutines"], err)
	}
	g := gs[1]
	if g["goid"] != 18.0 || g["status"] != "waiting" || g["wait_reason"] != "chan receive" || g["waiting_s"] != 720.0 || g["tid"] != nil {
		t.Errorf("goroutine 18: %v", g)
	}
	cb, _ := json.Marshal(g["created_by"])
	if string(cb) != `{"file":"/src/app/main.go","function":"main.main","goid":1,"line":40}` {
		t.Errorf("created_by %s", cb)
	}
	if gs[0]["tid"] != 42.0 || gs[0]["wait_reason"] != nil || gs[0]["waiting_s"] != nil || gs[0]["created_by"] != nil {
		t.Errorf("goroutine 1: %v", gs[0])
	}
	if _, ok := p["goroutine_groups"]; ok {
		t.Errorf("groups without grouping")
	}
	// Unknown layout: "goroutines": null, and a process not in Go: no keys.
	unknown := goProcess()
	unknown.Goroutines = nil
	b.Reset()
	JSON(&b, []*report.Process{unknown, {PID: 7}})
	var ps []map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &ps); err != nil {
		t.Fatal(err)
	}
	if raw, ok := ps[0]["goroutines"]; !ok || string(raw) != "null" {
		t.Errorf("unknown layout: goroutines %q (present %v)", raw, ok)
	}
	if _, ok := ps[1]["goroutines"]; ok {
		t.Errorf("a process not in Go has goroutines")
	}
	if _, ok := ps[1]["runtime"]; ok {
		t.Errorf("a process not in Go has a runtime")
	}
	b.Reset()
	Text(&b, []*report.Process{unknown}, TextOptions{})
	if !strings.Contains(b.String(), "\nGo 1.26.8: goroutines not read\n") {
		t.Errorf("text for an unknown layout:\n%s", b.String())
	}
}

// TestVerdictGoroutineLocks: goroutines blocked on Go locks are the
// verdict's answer for a hung Go program (the runtime records no owner):
// how many, in which code, for how long, and whether anything runs.
func TestVerdictGoroutineLocks(t *testing.T) {
	frames := func(fns ...string) []report.Frame {
		var fr []report.Frame
		for _, fn := range fns {
			fr = append(fr, report.Frame{Kind: "user", Function: fn})
		}
		return fr
	}
	p := &report.Process{Diagnosed: true, Runtime: &report.Runtime{Name: "go", Version: "go1.26.8"}}
	for i, fn := range []string{"main.reader", "main.transfer", "main.reader", "main.reader", "main.transfer"} {
		p.Goroutines = append(p.Goroutines, report.Goroutine{GoID: uint64(10 + i), Status: "waiting", WaitReason: "sync.Mutex.Lock",
			WaitingNS: int64(i) * 60e9, HasWaiting: true,
			Frames: frames("runtime.gopark", "sync.(*Mutex).lockSlow", "sync.(*Mutex).Lock", fn, "runtime.goexit")})
	}
	p.Goroutines = append(p.Goroutines,
		report.Goroutine{GoID: 1, Status: "waiting", WaitReason: "sync.RWMutex.RLock", Frames: frames("main.main")},
		report.Goroutine{GoID: 2, Status: "waiting", WaitReason: "IO wait", Frames: frames("main.serve")})
	want := "no deadlock found; 5 goroutines wait for sync.Mutex.Lock (3 in main.reader, 2 in main.transfer), the longest for 4 minutes, and no goroutine runs"
	if got := Verdict(p); got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
	p.Goroutines = append(p.Goroutines, report.Goroutine{GoID: 3, Status: "runnable"})
	if got := Verdict(p); !strings.HasSuffix(got, "the longest for 4 minutes") {
		t.Errorf("with a runnable goroutine: %q", got)
	}
}
