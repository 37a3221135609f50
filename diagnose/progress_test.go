package diagnose

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"stackshot/report"
)

func TestProgressKinds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	snap := func(sec int, ts map[int]ThreadSample) Snapshot {
		return Snapshot{Time: t0.Add(time.Duration(sec) * time.Second), Threads: ts}
	}
	s := func(stack, inner string, cpu uint64) ThreadSample {
		return ThreadSample{Stack: stack, Inner: inner, CPU: CPU{RunNS: cpu}}
	}
	const sec = uint64(time.Second)
	snaps := []Snapshot{
		snap(0, map[int]ThreadSample{1: s("a", "x", 5), 2: s("b", "spin", 10), 3: s("c", "y", 0), 4: s("d", "z", 0)}),
		snap(2, map[int]ThreadSample{1: s("a", "x", 5), 2: s("b2", "spin", 10+2*sec), 3: s("c2", "y2", sec), 4: s("e", "z", 0), 5: s("n", "n", 0)}),
		snap(4, map[int]ThreadSample{1: s("a", "x", 5), 2: s("b", "spin", 10+4*sec), 3: s("c", "y", 2*sec), 4: s("e", "z", 0), 5: s("n", "n", 0)}),
	}
	p := &report.Process{Threads: []report.Thread{{TID: 1}, {TID: 2}, {TID: 3}, {TID: 4}, {TID: 5}}}
	Progress(p, snaps)
	var got []string
	for _, th := range p.Threads {
		got = append(got, fmt.Sprintf("%d:%s:%.0f:%.2f", th.TID, th.Progress, th.SameStackS, th.CPUShare))
	}
	// 1 same stack, no CPU: stuck 4s. 2 a whole CPU, same innermost:
	// spinning. 3 half a CPU, innermost changed: moving. 4 stack changed
	// once, no CPU: moving, same for the last 2s. 5 was born during the
	// snapshots: moving.
	want := "[1:stuck:4:0.00 2:spinning:0:1.00 3:moving:0:0.50 4:moving:2:0.00 5:moving:2:0.00]"
	if fmt.Sprint(got) != want {
		t.Errorf("progress %v, want %s", got, want)
	}
	if s := p.ProgressSummary; s == nil || s.Snapshots != 3 || s.IntervalS != 2 || s.Stuck != 1 || s.Spinning != 1 || s.Moving != 3 {
		t.Errorf("summary %+v", p.ProgressSummary)
	}
}

// Accounting as the kernel keeps it, 100 ms apart, three snapshots: run
// and queued time grow by these many µs per interval, voluntary sleeps
// by vol; stopped threads were captured with a ptrace stop each time.
func TestProgressByCPUShare(t *testing.T) {
	type acct struct {
		wait           string
		run, queue     uint64 // µs per interval
		vol            uint64
		stopped, noVol bool
	}
	cases := map[string]struct {
		a      acct
		want   string
		wakeMS int
	}{
		// A whole CPU: spinning.
		"spinner": {acct{run: 99000, queue: 500}, "spinning", 0},
		// A machine so busy the spinner got a fifth of a CPU, queued the
		// rest, never slept: still spinning.
		"spinner on a busy machine": {acct{run: 20000, queue: 78000}, "spinning", 0},
		// ... and the same, each time stopped for the capture (a stop is
		// a voluntary switch).
		"stopped spinner on a busy machine": {acct{run: 20000, queue: 78000, vol: 1, stopped: true}, "spinning", 0},
		// Held by the captures' stops most of the time (neither run nor
		// queued), it never slept: spinning.
		"spinner held by the stops": {acct{run: 5000, queue: 20000, vol: 1, stopped: true}, "spinning", 0},
		// Slept once in each interval, little CPU: no spinner.
		"woke once an interval": {acct{run: 50, queue: 10, vol: 1}, "moving", 0},
		// Without the switch counts, only a real half CPU is spinning.
		"busy machine, no switch counts": {acct{run: 20000, queue: 78000, noVol: true}, "moving", 0},
		// A lock/usleep/unlock loop on a busy machine: runnable most of
		// the time (each wake-up queues), but it sleeps at every turn.
		"sleep loop on a busy machine": {acct{run: 3000, queue: 60000, vol: 400}, "moving", 0},
		// A timed wait of 10 ms on one futex word: waiting, wakes every ~10ms.
		"timed condvar wait": {acct{wait: "futex 0x10", run: 100, queue: 20, vol: 10}, "waiting", 10},
		// Blocked, stopped each time: the stops' CPU only; stuck.
		"stopped sleeper": {acct{wait: "read", run: 25, vol: 1, stopped: true}, "stuck", 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			var snaps []Snapshot
			for k := uint64(0); k < 3; k++ {
				a := c.a
				ts := ThreadSample{Stack: "s", Inner: "f", Wait: a.wait, Stopped: a.stopped,
					CPU: CPU{RunNS: 5000 + k*a.run*1000, WaitNS: 7000 + k*a.queue*1000, Vol: 3 + k*a.vol, HasVol: !a.noVol}}
				if a.wait == "" && name != "stopped sleeper" && k%2 == 1 {
					ts.Stack = "s2" // (a busy thread's stack moves)
				}
				snaps = append(snaps, Snapshot{Time: t0.Add(time.Duration(k) * 100 * time.Millisecond), Threads: map[int]ThreadSample{1: ts}})
			}
			p := &report.Process{Threads: []report.Thread{{TID: 1}}}
			Progress(p, snaps)
			th := p.Threads[0]
			if th.Progress != c.want {
				t.Errorf("%s (shares %v), want %s", th.Progress, th.CPUShares, c.want)
			}
			if len(th.CPUShares) != 2 {
				t.Errorf("%d shares, want one per interval", len(th.CPUShares))
			}
			gotMS := time.Duration(th.WakeNS).Milliseconds()
			if gotMS != int64(c.wakeMS) {
				t.Errorf("wakes every %dms, want %d", gotMS, c.wakeMS)
			}
		})
	}
}

// A thread in a timed wait that one snapshot catches between its wake-up
// and its next wait (queued for a CPU) is still waiting; one seen in two
// different waits is not.
func TestProgressWaitCaughtAwake(t *testing.T) {
	t0 := time.Unix(1000, 0)
	mk := func(waits ...string) []Snapshot {
		var snaps []Snapshot
		for k, w := range waits {
			snaps = append(snaps, Snapshot{Time: t0.Add(time.Duration(k) * time.Second), Threads: map[int]ThreadSample{
				1: {Stack: "s" + w, Inner: "f", Wait: w, CPU: CPU{RunNS: uint64(k) * 100000, Vol: uint64(k) * 10, HasVol: true}}}})
		}
		return snaps
	}
	for waits, want := range map[string]string{"futex 0x1,,futex 0x1": "waiting", ",futex 0x1,futex 0x1": "waiting",
		"futex 0x1,futex 0x2,futex 0x1": "moving", ",,futex 0x1": "moving"} {
		p := &report.Process{Threads: []report.Thread{{TID: 1}}}
		Progress(p, mk(strings.Split(waits, ",")...))
		if p.Threads[0].Progress != want {
			t.Errorf("waits %q: %s, want %s", waits, p.Threads[0].Progress, want)
		}
	}
}
