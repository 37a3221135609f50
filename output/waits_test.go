package output

import (
	"testing"

	"stackshot/report"
)

// A process where nothing is wrong: the verdict says so, then the largest
// group of threads alike; among groups of one size the one whose first
// thread comes first; with no two threads alike it names none of them.
func TestVerdictNothingWrong(t *testing.T) {
	in := func(fn, call string) []report.Frame {
		return []report.Frame{{Kind: "kernel", Function: "do_" + call}, {Kind: "user", Function: "libc_" + call, Module: "/lib/libc.so.6"},
			{Kind: "user", Function: fn, Module: "/srv/app"}, {Kind: "user", Function: "main", Module: "/srv/app"}}
	}
	th := func(tid int, name, fn, call string) report.Thread {
		return report.Thread{TID: tid, Name: name, State: "S", Syscall: &report.Syscall{Name: call, InCall: true}, Frames: in(fn, call)}
	}
	p := &report.Process{Diagnosed: true, Exe: "/srv/app", Threads: []report.Thread{
		th(10, "main", "loop", "epoll_wait"), th(11, "io-0", "io_wait", "read"), th(12, "gc-0", "gc_wait", "futex"),
		th(13, "io-1", "io_wait", "read"), th(14, "gc-1", "gc_wait", "futex"),
	}}
	p.Threads[2].WaitingFor = &report.WaitingFor{Kind: report.WaitCondvar, Address: 0x1000}
	p.Threads[4].WaitingFor = &report.WaitingFor{Kind: report.WaitCondvar, Address: 0x2000}
	want := `nothing is wrong: no thread waits for a lock, no deadlock; the largest group: 2 threads ("io-*") blocked in read in io_wait`
	if got := Verdict(p); got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
	// Stuck idle threads and one waiting over snapshots: still nothing wrong.
	p.ProgressSummary = &report.ProgressSummary{Snapshots: 3, Stuck: 4, Waiting: 1}
	for i := 1; i < 5; i++ {
		p.Threads[i].Progress = report.ProgressStuck
	}
	want = `nothing is wrong: no thread waits for a lock, no deadlock, nothing spinning or stuck on a lock over 3 snapshots; the largest group: 2 threads ("io-*") blocked in read in io_wait`
	if got := Verdict(p); got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
	// A thread stuck in uninterruptible sleep is a finding.
	p.Threads[1].State = "D"
	if got, want := Verdict(p), "no deadlock found; 1 thread stuck over 3 snapshots"; got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
	p.Threads[1].State = "S"
	// No two alike: none singled out.
	p.Threads = p.Threads[:3]
	p.ProgressSummary = nil
	if got, want := Verdict(p), "nothing is wrong: no thread waits for a lock, no deadlock; no two of its 3 threads are alike"; got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
}

func TestWaitPeriod(t *testing.T) {
	for ns, want := range map[int64]string{104e6: "100ms", 96e6: "96ms", 250e6: "250ms", 15e6: "15ms", 2.5e6: "2.5ms", 40e3: "40µs", 1.5e9: "1.5s"} {
		if got := period(ns); got != want {
			t.Errorf("period(%d) = %q, want %q", ns, got, want)
		}
	}
}

// A Python lock's wait line and DEADLOCK: line in the contract's words:
// the class in parentheses with the owner, or with why none is named (the
// note names the target's Python code: escaped); the owner's own wait
// nested; a report that gives no class says the lock's own.
func TestPythonWaitText(t *testing.T) {
	one, two := 101, 102
	threads := []report.Thread{
		{TID: one, Name: "abba-1", WaitingFor: &report.WaitingFor{Kind: report.WaitPythonRLock, Address: 0x7f40, Class: "threading.RLock", OwnerTID: &two, OwnerName: "abba-2"}},
		{TID: two, Name: "abba-2", WaitingFor: &report.WaitingFor{Kind: report.WaitPythonRLock, Address: 0x7f80, Class: "threading.RLock", OwnerTID: &one, OwnerName: "abba-1"}},
		{TID: 103, Name: "w", WaitingFor: &report.WaitingFor{Kind: report.WaitPythonLock, Address: 0x5000, Class: "threading.Lock", Note: "it records no owner; asked at take\x1b[2J (app.py:12)"}},
		{TID: 104, Name: "q", WaitingFor: &report.WaitingFor{Kind: report.WaitPythonLock, Address: 0x6000, Note: "it records no owner"}},
		{TID: 105, Name: "r", WaitingFor: &report.WaitingFor{Kind: report.WaitPythonRLock, Address: 0x7000, Class: "threading.RLock", OwnerTID: &one, OwnerName: "abba-1",
			OwnerState: &report.OwnerState{Waiting: &report.WaitingFor{Kind: report.WaitPythonRLock, Address: 0x7f40, Class: "threading.RLock", OwnerTID: &two, OwnerName: "abba-2"}}}},
	}
	for i, want := range []string{
		`    --- waiting for Python lock 0x7f40 (threading.RLock held by thread 102 "abba-2") ---` + "\n",
		"",
		`    --- waiting for Python lock 0x5000 (threading.Lock: it records no owner; asked at take\x1b[2J (app.py:12)) ---` + "\n",
		`    --- waiting for Python lock 0x6000 (threading.Lock: it records no owner) ---` + "\n",
		`    --- waiting for Python lock 0x7000 (threading.RLock held by thread 101 "abba-1", itself waiting for Python lock 0x7f40 (threading.RLock held by thread 102 "abba-2")) ---` + "\n",
	} {
		if got := waitLine(&threads[i]); want != "" && got != want {
			t.Errorf("thread %d:\n%s\nwant\n%s", threads[i].TID, got, want)
		}
	}
	byTID := map[int]*report.Thread{one: &threads[0], two: &threads[1]}
	got := deadlockLine(report.Deadlock{TIDs: []int{one, two}, Addresses: []uint64{0x7f40, 0x7f80}}, byTID, "")
	want := `DEADLOCK: thread 101 "abba-1" waits for Python lock 0x7f40 (threading.RLock held by thread 102 "abba-2"), ` +
		`which waits for Python lock 0x7f80 (threading.RLock held by thread 101 "abba-1")`
	if got != want {
		t.Errorf("deadlock line\n%s\nwant\n%s", got, want)
	}
}

// A Python thread waiting in a Condition, Event, Semaphore, Barrier or
// queue waits to be woken, as one on a condition variable: the verdict
// names a thread blocked on a threading.Lock (or joining a thread) first,
// and with only those idle waits, nothing is wrong.
func TestVerdictPythonIdleWaits(t *testing.T) {
	wait := func(tid int, class string, addr uint64) report.Thread {
		return report.Thread{TID: tid, Name: "worker", State: "S", Syscall: &report.Syscall{Name: "futex", InCall: true},
			Frames:     []report.Frame{{Kind: "user", Function: "lock_PyThread_acquire_lock"}},
			WaitingFor: &report.WaitingFor{Kind: report.WaitPythonLock, Address: addr, Class: class, Note: "asked"}}
	}
	p := &report.Process{Diagnosed: true, Threads: []report.Thread{
		wait(10, "queue.Queue", 0x1000), wait(11, "queue.Queue", 0x2000), wait(12, "threading.Condition", 0x3000),
		wait(13, "threading.Event", 0x4000), wait(14, "threading.Semaphore", 0x5000), wait(15, "threading.Barrier", 0x6000),
	}}
	want := `nothing is wrong: no thread waits for a lock, no deadlock; the largest group: 6 threads ("worker") waiting for Python lock (queue.Queue) in lock_PyThread_acquire_lock`
	if got := Verdict(p); got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
	for _, c := range []string{"threading.Lock", "threading.Thread"} {
		p.Threads[5] = wait(15, c, 0x9000)
		want := `no deadlock found; 1 thread ("worker") waits for Python lock 0x9000 (` + c + `)`
		if got := Verdict(p); got != want {
			t.Errorf("verdict\n%q, want\n%q", got, want)
		}
	}
}
