package diagnose

import (
	"fmt"
	"time"

	"stackshot/report"
)

// Snapshot is what progress needs of one snapshot of a process: per
// thread, its user stack's function sequence, its innermost user function,
// the wait it was in, and the kernel's accounting of its time.
type Snapshot struct {
	Time    time.Time
	Threads map[int]ThreadSample
	// CPUAt is when the accounting was read (after the snapshot was
	// resolved, which the first time takes long); zero: at Time.
	CPUAt time.Time
}

// cpuAt is when s's accounting was read.
func (s *Snapshot) cpuAt() time.Time {
	if s.CPUAt.IsZero() {
		return s.Time
	}
	return s.CPUAt
}

// ThreadSample is one thread in one snapshot.
type ThreadSample struct {
	Stack string // report.StackKey of the user frames
	Inner string // innermost user function ("" unknown)
	// Wait names the blocking call it was in ("" none): the system call,
	// and for futex(2) the word, so that the same lock is the same wait.
	Wait string
	CPU
	Stopped bool  // captured with a ptrace stop (which costs it CPU time)
	PauseNS int64 // how long that stop held it
}

// CPU is the kernel's accounting of a thread's time so far: on a CPU
// (RunNS) and runnable but waiting for one (WaitNS), from schedstat, and
// how often it gave the CPU up of its own accord (voluntary context
// switches, from status; HasVol false when that could not be read).
type CPU struct {
	RunNS, WaitNS uint64
	Vol           uint64
	HasVol        bool
}

// stopCPUAllowance is the CPU time a ptrace stop may cost a blocked
// thread (it leaves its system call for the stop and enters it again):
// 22 to 26 µs a stop measured here (schedstat over 20 --mode stop dumps
// of a thread blocked in read); a thread whose CPU time grew by no more than
// that per stop has not run on its own. A spinning thread uses a CPU's
// whole interval.
const stopCPUAllowance = 500 * time.Microsecond

// Thresholds of progress. A thread spins when in every interval it had
// half a CPU or more, or, on a machine too busy to give it that:
//   - it never slept of its own accord (the capture's stops aside) and
//     was on a CPU or queued for one spinMinDemand of the time or more: a
//     thread that does not sleep and is not idle wants the CPU (the time
//     a capture's stop holds it is neither run nor queued, and on a busy
//     machine that stop lasts while the tracer itself queues, longer than
//     its measured pause), or
//   - it slept at most spinMaxSleeps times and was runnable half the time
//     its stop did not hold it, or more.
//
// A thread in a sleep loop sleeps at every turn, however long the queue it
// wakes into. A waiting thread used less than waitMaxShare of a CPU over
// the snapshots.
const (
	spinShare     = 0.5
	spinMinDemand = 0.1
	spinMaxSleeps = 2
	waitMaxShare  = 0.1
)

// Sample takes what Progress needs from a resolved snapshot; cpu holds
// each thread's accounting, read at cpuAt.
func Sample(p *report.Process, cpu map[int]CPU, cpuAt time.Time) Snapshot {
	s := Snapshot{Time: p.Time, Threads: make(map[int]ThreadSample, len(p.Threads)), CPUAt: cpuAt}
	for i := range p.Threads {
		t := &p.Threads[i]
		var user []report.Frame
		for j := range t.Frames {
			if t.Frames[j].Kind == "user" {
				user = t.Frames[j:]
				break
			}
		}
		ts := ThreadSample{Stack: report.StackKey(user), CPU: cpu[t.TID], Stopped: t.Capture == "ptrace", PauseNS: t.PauseNS}
		if len(user) > 0 {
			ts.Inner = user[0].Function
		}
		if sc := t.Syscall; sc != nil && sc.InCall {
			ts.Wait = sc.Name
			if sc.Name == "futex" {
				ts.Wait = fmt.Sprintf("futex %#x", sc.Args[0])
			}
		}
		s.Threads[t.TID] = ts
	}
	return s
}

// history is one thread's samples across the snapshots and what they say.
type history struct {
	everywhere, sameStack, sameInner, sameWait bool
	since                                      time.Time // start of the run of equal stacks that ends at the last snapshot
	usedCPU                                    bool      // more CPU time than its stops cost
	spinAll                                    bool      // spun in every interval
	shares                                     []float64
	share                                      float64 // over all the snapshots
	wakes                                      uint64  // voluntary sleeps, not counting stops
	hasVol                                     bool
}

// oneWait reports whether thread tid was in one and the same wait in at
// least half of snaps and in no other: a snapshot that falls between its
// wake-up and its next wait (on a busy machine it queues for a CPU a long
// while) sees it running.
func oneWait(tid int, snaps []Snapshot) bool {
	wait, n := "", 0
	for k := range snaps {
		w := snaps[k].Threads[tid].Wait
		switch {
		case w == "":
		case wait == "" || w == wait:
			wait = w
			n++
		default:
			return false
		}
	}
	return n > 0 && 2*n >= len(snaps)
}

// threadHistory reads thread tid's samples in snaps (time order).
func threadHistory(tid int, snaps []Snapshot) history {
	last := snaps[len(snaps)-1]
	cur := last.Threads[tid]
	h := history{everywhere: true, sameStack: true, sameInner: cur.Inner != "", sameWait: true,
		since: last.Time, spinAll: true, hasVol: true}
	run := true
	for k := len(snaps) - 2; k >= 0; k-- {
		s, ok := snaps[k].Threads[tid]
		if !ok {
			h.everywhere, run, h.sameStack, h.sameInner, h.sameWait = false, false, false, false, false
			continue
		}
		if s.Stack != cur.Stack {
			h.sameStack, run = false, false
		} else if run {
			h.since = snaps[k].Time
		}
		h.sameInner = h.sameInner && s.Inner == cur.Inner
	}
	h.sameWait = h.everywhere && oneWait(tid, snaps)
	if !h.everywhere {
		h.spinAll = false
		return h
	}
	first := snaps[0].Threads[tid]
	var stops uint64
	for k := 1; k < len(snaps); k++ {
		a, b := snaps[k-1].Threads[tid], snaps[k].Threads[tid]
		dt := float64(snaps[k].cpuAt().Sub(snaps[k-1].cpuAt()))
		if b.RunNS < a.RunNS || b.WaitNS < a.WaitNS || dt <= 0 {
			// (time that went down is another thread's: a reused id)
			h.everywhere, h.spinAll = false, false
			return h
		}
		var stop uint64
		if b.Stopped {
			stop = 1
		}
		stops += stop
		run, queued := float64(b.RunNS-a.RunNS), float64(b.WaitNS-a.WaitNS)
		share := run / dt
		h.shares = append(h.shares, share)
		sleeps, known := uint64(0), a.HasVol && b.HasVol && b.Vol >= a.Vol
		if known {
			sleeps = b.Vol - a.Vol - min(b.Vol-a.Vol, stop)
			h.wakes += sleeps
		}
		h.hasVol = h.hasVol && known

		// (Time held by the capture's stop is neither run nor queued: on a
		// busy machine the stop lasts while the tracer itself queues.)
		free := max(dt-float64(b.PauseNS), 1)
		busy := share >= spinShare || known && sleeps == 0 && (run+queued)/dt >= spinMinDemand ||
			known && sleeps <= spinMaxSleeps && (run+queued)/free >= spinShare
		h.spinAll = h.spinAll && busy
	}
	span := float64(last.cpuAt().Sub(snaps[0].cpuAt()))
	h.share = float64(cur.RunNS-first.RunNS) / span
	h.usedCPU = cur.RunNS-first.RunNS > stops*uint64(stopCPUAllowance)
	return h
}

// Progress says, for each thread of p (the last snapshot), whether it is
// stuck (the same user stack in every snapshot and no CPU time used),
// spinning (the same innermost function every time and busy in every
// interval: see spinShare), waiting (in the same wait every time, having
// used little CPU: a timed wait, an event loop at rest) or moving, its
// share of a CPU in each interval, how often a waiting thread wakes, and
// for how long its stack has been the same; it sets p.ProgressSummary.
// snaps are in time order, the last one p's.
func Progress(p *report.Process, snaps []Snapshot) {
	if len(snaps) < 2 {
		return
	}
	last := snaps[len(snaps)-1]
	sum := &report.ProgressSummary{Snapshots: len(snaps),
		IntervalS: last.Time.Sub(snaps[0].Time).Seconds() / float64(len(snaps)-1)}
	for i := range p.Threads {
		t := &p.Threads[i]
		if _, ok := last.Threads[t.TID]; !ok {
			continue
		}
		h := threadHistory(t.TID, snaps)
		t.CPUShares, t.CPUShare = h.shares, h.share
		switch {
		case h.everywhere && h.sameStack && !h.usedCPU:
			t.Progress = report.ProgressStuck
			sum.Stuck++
		case h.everywhere && h.sameInner && h.spinAll:
			t.Progress = report.ProgressSpinning
			sum.Spinning++
		case h.everywhere && h.sameWait && h.share < waitMaxShare:
			t.Progress = report.ProgressWaiting
			sum.Waiting++
			// A wake-up at least once an interval on average is a
			// period worth saying.
			if h.hasVol && h.wakes >= uint64(len(snaps)-1) {
				t.WakeNS = int64(last.cpuAt().Sub(snaps[0].cpuAt())) / int64(h.wakes)
			}
		default:
			t.Progress = report.ProgressMoving
			sum.Moving++
		}
		t.SameStackS = last.Time.Sub(h.since).Seconds()
	}
	p.ProgressSummary = sum
}
