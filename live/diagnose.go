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

// cpuTimes reads each thread's time on a CPU (schedstat), after the
// capture: reading it needs no stop.
func cpuTimes(pid int, p *report.Process) map[int]uint64 {
	out := make(map[int]uint64, len(p.Threads))
	for i := range p.Threads {
		if st, err := procmaps.ReadSchedStat(pid, p.Threads[i].TID); err == nil {
			out[p.Threads[i].TID] = st.RunNS
		}
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
	if child := s.sandboxFor(raw.PID); child != nil {
		child.Locks(rp, tasks)
	} else {
		diagnose.Diagnose(rp, ptrace.MemReader{PID: raw.MemPID()}, tasks)
	}
	foreignOwners(rp)
	if s.sandboxFor(raw.PID) == nil {
		// (Another user's process: the child names them, from the
		// files it parses.)
		space := s.res.Space(raw, ptrace.MemReader{PID: raw.MemPID()})
		diagnose.NameLocks(rp, space.DataName)
	}
	if s.o.Group || (!s.o.NoGroup && len(rp.Threads) > GroupAuto) {
		diagnose.Group(rp)
	}
	return rp
}

// dumpSnapshots takes --count snapshots of every target, --interval
// apart, and returns the last of each (for the targets the last round
// read), its threads marked stuck, spinning or moving.
func (s *Session) dumpSnapshots(pids []int) ([]*report.Process, int, error) {
	snaps := map[int][]diagnose.Snapshot{}
	var last map[int]*report.Process
	var failed int
	var began time.Time
	for round := 0; round < s.o.Count; round++ {
		if round > 0 {
			select {
			case <-time.After(time.Until(began.Add(s.o.Interval))):
			case <-s.cancel:
			}
		}
		began = time.Now()
		last = map[int]*report.Process{}
		final := round == s.o.Count-1
		f, err := s.captureEach(pids, began.Add(s.o.Timeout), func(p *ptrace.Process) (func(), error) {
			resolve := s.resolveCaptured
			if final {
				resolve = s.resolveLive // the last snapshot is the report
			}
			rp, err := resolve(p)
			if err != nil {
				return nil, err
			}
			sample := diagnose.Sample(rp, cpuTimes(p.PID, rp))
			return func() { snaps[p.PID] = append(snaps[p.PID], sample); last[p.PID] = rp }, nil
		})
		if err != nil {
			return nil, f, err
		}
		failed = f
	}
	var procs []*report.Process
	for _, pid := range pids {
		if rp := last[pid]; rp != nil {
			diagnose.Progress(rp, snaps[pid])
			procs = append(procs, rp)
		}
	}
	return procs, failed, nil
}
