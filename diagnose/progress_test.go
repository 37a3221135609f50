package diagnose

import (
	"fmt"
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
		return ThreadSample{Stack: stack, Inner: inner, CPUNS: cpu}
	}
	snaps := []Snapshot{
		snap(0, map[int]ThreadSample{1: s("a", "x", 5), 2: s("b", "spin", 10), 3: s("c", "y", 0), 4: s("d", "z", 0)}),
		snap(2, map[int]ThreadSample{1: s("a", "x", 5), 2: s("b2", "spin", 20), 3: s("c2", "y2", 1), 4: s("e", "z", 0), 5: s("n", "n", 0)}),
		snap(4, map[int]ThreadSample{1: s("a", "x", 5), 2: s("b", "spin", 30), 3: s("c", "y", 2), 4: s("e", "z", 0), 5: s("n", "n", 0)}),
	}
	p := &report.Process{Threads: []report.Thread{{TID: 1}, {TID: 2}, {TID: 3}, {TID: 4}, {TID: 5}}}
	Progress(p, snaps)
	var got []string
	for _, th := range p.Threads {
		got = append(got, fmt.Sprintf("%d:%s:%.0f", th.TID, th.Progress, th.SameStackS))
	}
	// 1 same stack, no CPU: stuck 4s. 2 CPU used, same innermost: spinning.
	// 3 CPU used, innermost changed: moving. 4 stack changed once, no CPU:
	// moving, same for the last 2s. 5 was born during the snapshots: moving.
	want := "[1:stuck:4 2:spinning:0 3:moving:0 4:moving:2 5:moving:2]"
	if fmt.Sprint(got) != want {
		t.Errorf("progress %v, want %s", got, want)
	}
	if s := p.ProgressSummary; s == nil || s.Snapshots != 3 || s.IntervalS != 2 || s.Stuck != 1 || s.Spinning != 1 || s.Moving != 3 {
		t.Errorf("summary %+v", p.ProgressSummary)
	}
}

// A blocked thread that each snapshot stops (--mode stop, or a walk that
// needs its registers) gains CPU time from the stops alone: it is stuck,
// not spinning. One that gains more than the stops cost ran.
func TestProgressStopsCostCPU(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var snaps []Snapshot
	for k := 0; k < 3; k++ {
		snaps = append(snaps, Snapshot{Time: t0.Add(time.Duration(k) * 100 * time.Millisecond), Threads: map[int]ThreadSample{
			1: {Stack: "a", Inner: "pause", CPUNS: 1000 + uint64(k)*20000, Stopped: true},
			2: {Stack: "b", Inner: "loop", CPUNS: 1000 + uint64(k)*5000000, Stopped: true},
			3: {Stack: "c", Inner: "read", CPUNS: 1000 + uint64(k)*20000},
		}})
	}
	p := &report.Process{Threads: []report.Thread{{TID: 1}, {TID: 2}, {TID: 3}}}
	Progress(p, snaps)
	var got []string
	for _, th := range p.Threads {
		got = append(got, fmt.Sprintf("%d:%s", th.TID, th.Progress))
	}
	// 3 was never stopped: its 40 µs are its own.
	if want := "[1:stuck 2:spinning 3:spinning]"; fmt.Sprint(got) != want {
		t.Errorf("progress %v, want %s", got, want)
	}
}
