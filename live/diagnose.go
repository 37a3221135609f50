//go:build linux

package live

import (
	"time"

	"stackshot/diagnose"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
)

// GroupAuto is the thread count past which dump groups threads unless told
// not to (--no-group).
const GroupAuto = 64

// cpuTimes reads each thread's accounting (schedstat: time on a CPU and
// queued for one; status: voluntary context switches), after the
// capture: reading it needs no stop.
func cpuTimes(pid int, p *report.Process) map[int]diagnose.CPU {
	out := make(map[int]diagnose.CPU, len(p.Threads))
	for i := range p.Threads {
		tid := p.Threads[i].TID
		st, err := procmaps.ReadSchedStat(pid, tid)
		if err != nil {
			continue
		}
		c := diagnose.CPU{RunNS: st.RunNS, WaitNS: st.WaitNS}
		if ts, err := procmaps.ReadTaskStatus(pid, tid); err == nil {
			c.Vol, c.HasVol = ts.VolCtx, true
		}
		out[tid] = c
	}
	return out
}

// diagnose adds lock owners, deadlocks and groups to a resolved snapshot.
// It runs after every thread runs again and reads lock words with
// process_vm_readv (pread of /proc/PID/mem in the target's sandboxed
// child, where they are interpreted): no thread is stopped for it.
//
// tasks are the target's threads now (liveTasks), read after the capture.
func (s *Session) diagnose(rp *report.Process, raw *ptrace.Process, tasks map[int]bool) *report.Process {
	find := func(tasks map[int]bool) {
		if child := s.sandboxFor(raw.PID); child != nil {
			child.Locks(rp, tasks)
		} else {
			diagnose.Diagnose(rp, ptrace.MemReader{PID: raw.MemPID()}, tasks)
		}
	}
	// (in the ids of the target's PID namespace: see pidns.go)
	switch ns, ok := nsTIDs(raw.PID, tasks); {
	case !ok:
		find(map[int]bool{}) // no owner can be proved
	case ns != nil:
		inTargetNamespace(rp, tasks, ns, find)
	default:
		find(tasks)
	}
	foreignOwners(rp)
	if s.sandboxFor(raw.PID) == nil {
		// (Another user's process: the child names them, from the
		// files it parses.)
		space := s.res.Space(raw, ptrace.MemReader{PID: raw.MemPID()})
		diagnose.NameLocks(rp, space.DataName)
	}
	// What blocked threads' descriptors are: /proc of the target's own
	// namespaces, and a poll's or select's arguments (plain integers) read
	// from its memory. (After the locks are named: an owner's own wait is
	// copied into the edges that lead to it.)
	diagnose.NameFDs(rp, procmaps.NewFDReader(raw.MemPID()), ptrace.MemReader{PID: raw.MemPID()})
	if s.o.Group || (!s.o.NoGroup && len(rp.Threads) > GroupAuto) {
		diagnose.Group(rp)
	}
	return rp
}

// series is what a --count series knows of each target between
// snapshots.
type series struct {
	snaps map[int][]diagnose.Snapshot
	last  map[int]*report.Process // each pid's latest snapshot
	at    map[int]int             // the round last[pid] is of
	first map[int]procmaps.Identity
	ended map[int]bool // its pid named another process: no more snapshots
}

// dumpSnapshots takes --count snapshots of every target, --interval
// apart, and returns the last of each (for the targets the last round
// read), its threads marked stuck, spinning or moving.
//
// Every snapshot is of the process the first one read: a pid that names
// another process at a later snapshot (checked before it is read, after
// its capture and after its resolution) ends that target's series with
// a warning, counted as failed; its report is then its latest snapshot
// before, with the progress of the snapshots before. Whether its bytes are
// parsed in a sandboxed child is decided again at each snapshot.
func (s *Session) dumpSnapshots(pids []int) ([]*report.Process, int, error) {
	sr := series{snaps: map[int][]diagnose.Snapshot{}, last: map[int]*report.Process{}, at: map[int]int{},
		first: map[int]procmaps.Identity{}, ended: map[int]bool{}}
	var began time.Time
	for round := 0; round < s.o.Count && !s.Interrupted(); round++ {
		if round > 0 {
			select {
			case <-time.After(time.Until(began.Add(s.o.Interval))):
			case <-s.cancel:
			}
		}
		began = time.Now()
		for _, pid := range pids {
			if s.Interrupted() {
				break
			}
			if !sr.ended[pid] {
				s.snapshot(&sr, pid, round, began.Add(s.o.Timeout))
			}
		}
	}
	if s.Interrupted() {
		return nil, 0, ErrInterrupted
	}
	var procs []*report.Process
	failed := 0
	for _, pid := range pids {
		rp := sr.last[pid]
		switch {
		case sr.ended[pid]:
			failed++
			if rp == nil {
				continue
			}
			if s.o.Group || (!s.o.NoGroup && len(rp.Threads) > GroupAuto) {
				diagnose.Group(rp) // (no lock words: the process is gone)
			}
		case rp == nil || sr.at[pid] != s.o.Count-1:
			failed++ // (said when its last round could not read it)
			continue
		}
		diagnose.Progress(rp, sr.snaps[pid])
		procs = append(procs, rp)
	}
	return procs, failed, nil
}

// snapshot takes snapshot round (from 0) of pid into sr; the last round's
// is resolved whole (it is the report).
func (s *Session) snapshot(sr *series, pid, round int, deadline time.Time) {
	id, known := sr.first[pid]
	if beforeSnapshotHook != nil && round > 0 {
		beforeSnapshotHook(pid, round+1)
	}
	if !known {
		id, _ = procmaps.ReadIdentity(pid) // a failure shows in the capture
	} else if err := sameProcess(id); err != nil {
		s.endSeries(sr, pid, err, round)
		return
	}
	s.decideAgain(pid)
	final := round == s.o.Count-1
	err := s.captureOne(pid, deadline, id, func(p *ptrace.Process) (func(), error) {
		resolve := s.resolveCaptured
		if final {
			resolve = s.resolveLive // the last snapshot is the report
		}
		rp, err := resolve(p)
		if err != nil {
			return nil, err
		}
		at := time.Now()
		sample := diagnose.Sample(rp, cpuTimes(p.PID, rp), at)
		return func() { sr.snaps[pid] = append(sr.snaps[pid], sample); sr.last[pid], sr.at[pid] = rp, round }, nil
	})
	switch {
	case err == nil:
		if !known && id.PID != 0 {
			sr.first[pid] = id
		}
	case known && replaced(err):
		s.endSeries(sr, pid, err, round)
	case err != ErrInterrupted && err != errSaid:
		s.o.Say(err.Error())
		// Replaced while its first snapshot was read: nothing of either
		// is shown, as the message says (not the newcomer's series).
		sr.ended[pid] = sr.ended[pid] || replaced(err)
	}
}

// endSeries ends pid's series at snapshot round (from 0): its pid names
// another process now (err).
func (s *Session) endSeries(sr *series, pid int, err error, round int) {
	s.o.Say(seriesEnded(err, round+1, s.o.Count, len(sr.snaps[pid])))
	sr.ended[pid] = true
}
