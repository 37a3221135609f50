package output

import (
	"strings"
	"testing"

	"stackshot/report"
)

// idleWorker is a thread blocked on a condition variable at cv, in a
// futex call on cv+0x28, with frames at the given user PCs.
func idleWorker(tid int, name string, cv uint64, pcs ...uint64) report.Thread {
	t := report.Thread{TID: tid, Name: name, State: "S", Capture: "nostop",
		Syscall:    &report.Syscall{Name: "futex", InCall: true, Args: [6]uint64{cv + 0x28, 0x189}},
		WaitingFor: &report.WaitingFor{Kind: report.WaitCondvar, Address: cv, Note: "a condition variable has no owner"},
		Frames:     []report.Frame{{Kind: "kernel", Function: "futex_wait", Offset: 0x9a, HasOffset: true}}}
	for _, pc := range pcs {
		t.Frames = append(t.Frames, report.Frame{Kind: "user", PC: pc, Function: "worker", Module: "/app", HasModule: true, ModuleOffset: pc - 0x1000})
	}
	return t
}

func renderText(t *testing.T, p *report.Process, o TextOptions) string {
	t.Helper()
	var b strings.Builder
	if err := Text(&b, []*report.Process{p}, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestTextFoldsIdleAlike: threads that wait alike for nothing anyone
// holds, with the same frames, are shown once, each named with its own
// wait, in the order of the first; a thread waiting for a held mutex, one
// with other frames, one in D state are shown on their own; --no-group
// and -v show every thread.
func TestTextFoldsIdleAlike(t *testing.T) {
	owner := 10
	held := idleWorker(14, "waiter", 0x5000, 0x1100, 0x1200)
	held.WaitingFor = &report.WaitingFor{Kind: report.WaitMutex, Address: 0x6000, OwnerTID: &owner, OwnerName: "main"}
	held2 := held
	held2.TID, held2.Name = 15, "waiter2"
	dstate := idleWorker(16, "disk", 0x5100, 0x1100, 0x1200)
	dstate.State = "D"
	p := &report.Process{PID: 10, Comm: "app", Exe: "/app", State: "S", Threads: []report.Thread{
		{TID: 10, Name: "main", State: "R", Capture: "ptrace", Frames: []report.Frame{{Kind: "user", PC: 0x1300, Function: "main"}}},
		idleWorker(11, "pool-1", 0x5000, 0x1100, 0x1200),
		idleWorker(12, "other", 0x5040, 0x1100, 0x1210),
		idleWorker(13, "pool-2", 0x5080, 0x1100, 0x1200),
		held, held2, dstate,
		idleWorker(17, "pool-3", 0x5000, 0x1100, 0x1200),
	}}
	text := renderText(t, p, TextOptions{})
	for _, want := range []string{
		"\n3 threads with one stack: 11 \"pool-1\", 13 \"pool-2\", 17 \"pool-3\" (state S, in futex, read without stopping):\n" +
			"#0   futex_wait+0x9a [kernel]\n" +
			"    --- futex(…): waiting for condition variables 0x5000, 0x5080, 0x5000 ---\n",
		"\nThread 12 \"other\" (state S, in futex, read without stopping):\n#0   futex_wait+0x9a [kernel]\n    --- futex(0x5068, …): waiting for condition variable 0x5040 ---\n",
		"\nThread 14 \"waiter\" (", "\nThread 15 \"waiter2\" (", "\nThread 16 \"disk\" (state D",
		"    --- futex(0x5028, 0x189, 0x0, 0x0, 0x0, 0x0) ---\n    --- waiting for mutex 0x6000 held by thread 10 \"main\" ---\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("want %q in\n%s", want, text)
		}
	}
	if strings.Index(text, "3 threads with one stack") > strings.Index(text, "Thread 12 ") {
		t.Errorf("the fold is not in the place of its first thread (11, before 12):\n%s", text)
	}
	for _, o := range []TextOptions{{NoFold: true}, {Verbose: true}} {
		text := renderText(t, p, o)
		if n := strings.Count(text, "\nThread "); n != len(p.Threads) || strings.Contains(text, "with one stack") {
			t.Errorf("%+v: want each of %d threads on its own, got %d headers:\n%s", o, len(p.Threads), n, text)
		}
	}
	// Threads waiting on one condition variable name it once.
	p.Threads = []report.Thread{idleWorker(11, "pool-1", 0x5000, 0x1100), idleWorker(12, "pool-2", 0x5000, 0x1100)}
	if text := renderText(t, p, TextOptions{}); !strings.Contains(text, "    --- futex(0x5028, …): waiting for condition variable 0x5000 ---\n") {
		t.Errorf("want one condition variable named:\n%s", text)
	}
}
