package diagnose

import (
	"time"

	"stackshot/report"
)

// Snapshot is what progress needs of one snapshot of a process: per
// thread, its user stack's function sequence, its innermost user function
// and the CPU time it had used.
type Snapshot struct {
	Time    time.Time
	Threads map[int]ThreadSample
}

// ThreadSample is one thread in one snapshot.
type ThreadSample struct {
	Stack   string // report.StackKey of the user frames
	Inner   string // innermost user function ("" unknown)
	CPUNS   uint64 // time on a CPU so far (schedstat)
	Stopped bool   // captured with a ptrace stop (which costs it CPU time)
}

// stopCPUAllowance is the CPU time a ptrace stop may cost a blocked
// thread (it leaves its system call for the stop and enters it again):
// 22 to 26 µs a stop measured here (schedstat over 20 --mode stop dumps
// of a thread blocked in read); a thread whose CPU time grew by no more than
// that per stop has not run on its own. A spinning thread uses a CPU's
// whole interval.
const stopCPUAllowance = 500 * time.Microsecond

// Sample takes what Progress needs from a resolved snapshot; cpu holds
// each thread's CPU time in nanoseconds.
func Sample(p *report.Process, cpu map[int]uint64) Snapshot {
	s := Snapshot{Time: p.Time, Threads: make(map[int]ThreadSample, len(p.Threads))}
	for i := range p.Threads {
		t := &p.Threads[i]
		var user []report.Frame
		for j := range t.Frames {
			if t.Frames[j].Kind == "user" {
				user = t.Frames[j:]
				break
			}
		}
		ts := ThreadSample{Stack: report.StackKey(user), CPUNS: cpu[t.TID], Stopped: t.Capture == "ptrace"}
		if len(user) > 0 {
			ts.Inner = user[0].Function
		}
		s.Threads[t.TID] = ts
	}
	return s
}

// Progress says, for each thread of p (the last snapshot), whether it is
// stuck (the same user stack in every snapshot and no CPU time used),
// spinning (CPU time used, the same innermost function every time) or
// moving, and for how long its stack has been the same; it sets
// p.ProgressSummary. snaps are in time order, the last one p's.
func Progress(p *report.Process, snaps []Snapshot) {
	if len(snaps) < 2 {
		return
	}
	last := snaps[len(snaps)-1]
	sum := &report.ProgressSummary{Snapshots: len(snaps),
		IntervalS: last.Time.Sub(snaps[0].Time).Seconds() / float64(len(snaps)-1)}
	for i := range p.Threads {
		t := &p.Threads[i]
		cur, ok := last.Threads[t.TID]
		if !ok {
			continue
		}
		sameStack, sameInner, everywhere := true, cur.Inner != "", true
		since := last.Time
		run := true      // still in the run of equal stacks that ends at the last snapshot
		var stops uint64 // (the first snapshot's stop is in its CPU time already)
		if cur.Stopped {
			stops++
		}
		for k := len(snaps) - 2; k >= 0; k-- {
			s, ok := snaps[k].Threads[t.TID]
			if ok && s.Stopped && k > 0 {
				stops++
			}
			if !ok {
				everywhere, run = false, false
				sameStack, sameInner = false, false
				continue
			}
			if s.Stack != cur.Stack {
				sameStack, run = false, false
			} else if run {
				since = snaps[k].Time
			}
			if s.Inner != cur.Inner {
				sameInner = false
			}
		}
		first, _ := snaps[0].Threads[t.TID]
		// (CPU time that went down is another thread's: a reused id)
		usedCPU := cur.CPUNS < first.CPUNS || cur.CPUNS-first.CPUNS > stops*uint64(stopCPUAllowance)
		switch {
		case everywhere && sameStack && !usedCPU:
			t.Progress = report.ProgressStuck
			sum.Stuck++
		case everywhere && usedCPU && sameInner:
			t.Progress = report.ProgressSpinning
			sum.Spinning++
		default:
			t.Progress = report.ProgressMoving
			sum.Moving++
		}
		t.SameStackS = last.Time.Sub(since).Seconds()
	}
	p.ProgressSummary = sum
}
