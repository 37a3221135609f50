package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"stackshot/report"
)

// A CPython thread's threading name: in its header, escaped like any
// name the target gives; in the JSON as python_name; in place of the
// process's default name where an owner or a deadlock names a thread;
// and each said when threads alike are folded into one entry.
func TestPythonNamesText(t *testing.T) {
	one, two := 11, 12
	p := &report.Process{PID: 10, Comm: "python3", Exe: "/usr/bin/python3.11", State: "S", Diagnosed: true, Threads: []report.Thread{
		{TID: 10, Name: "python3", PythonName: "MainThread", State: "S", Frames: []report.Frame{{Kind: "python", Function: "main", File: "app.py", Line: 3}}},
		{TID: 11, Name: "python3", PythonName: "worker-1", State: "S",
			WaitingFor: &report.WaitingFor{Kind: report.WaitPythonRLock, Address: 0x7f00, OwnerTID: &two, OwnerName: "esc\x1b[2J"}},
		{TID: 12, Name: "python3", PythonName: "esc\x1b[2J", State: "S",
			WaitingFor: &report.WaitingFor{Kind: report.WaitPythonRLock, Address: 0x7f40, OwnerTID: &one, OwnerName: "worker-1"}},
		{TID: 13, Name: "pool", PythonName: "pool-thread", State: "S"},
	}, Deadlocks: []report.Deadlock{{TIDs: []int{11, 12}, Addresses: []uint64{0x7f00, 0x7f40}}}}
	for i := 14; i < 14+3; i++ {
		w := idleWorker(i, "python3", 0x5000, 0x1100, 0x1200)
		w.PythonName = fmt.Sprintf("idle-%d", i)
		p.Threads = append(p.Threads, w)
	}
	out := renderText(t, p, TextOptions{})
	for _, want := range []string{
		`Thread 10 "python3" (state S, python "MainThread"`,
		`Thread 11 "python3" (state S, python "worker-1"`,
		`Thread 12 "python3" (state S, python "esc\x1b[2J"`,
		`Thread 13 "pool" (state S, python "pool-thread"`,
		`held by thread 12 "esc\x1b[2J"`,
		`DEADLOCK: thread 11 "worker-1" waits`,
		`14 "python3" python "idle-14", 15 "python3" python "idle-15", 16 "python3" python "idle-16"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("text holds an escape character:\n%q", out)
	}
	// Past foldShown: every name, once.
	q := *p
	q.Threads, q.Deadlocks = nil, nil
	for i := 20; i < 20+foldShown+2; i++ {
		w := idleWorker(i, "python3", 0x5000, 0x1100, 0x1200)
		w.PythonName = fmt.Sprintf("w%d", i)
		q.Threads = append(q.Threads, w)
	}
	out = renderText(t, &q, TextOptions{})
	if want := `"python3": threads 20-29, python "w20", "w21", "w22", "w23", "w24", "w25", "w26", "w27", "w28", "w29"`; !strings.Contains(out, want) {
		t.Errorf("text lacks %q:\n%s", want, out)
	}

	var b bytes.Buffer
	if err := JSONList(&b, []*report.Process{p}, true); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Threads []struct {
			TID        int    `json:"tid"`
			PythonName string `json:"python_name"`
		} `json:"threads"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Threads[2].PythonName != "esc\x1b[2J" || got[0].Threads[0].PythonName != "MainThread" {
		t.Errorf("JSON threads %+v", got)
	}
}
