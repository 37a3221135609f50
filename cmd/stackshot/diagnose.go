//go:build linux

package main

import (
	"fmt"
	"time"

	"stackshot/diagnose"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
)

// groupAuto is the thread count past which dump groups threads unless told
// not to (--no-group).
const groupAuto = 64

// diagFlags are dump's diagnosis flags.
type diagFlags struct {
	group    bool
	noGroup  bool
	interval time.Duration
	count    int
}

func (c *common) addDiagFlags() {
	fs := c.fs
	fs.BoolVar(&c.diag.group, "group", false, fmt.Sprintf("fold threads with the same stack into one entry (on past %d threads)", groupAuto))
	fs.BoolVar(&c.diag.noGroup, "no-group", false, "never fold threads")
	fs.DurationVar(&c.diag.interval, "interval", time.Second, "with --count: time between snapshots")
	fs.IntVar(&c.diag.count, "count", 1, "take N snapshots --interval apart; say which threads are stuck, spinning or moving")
}

func (c *common) checkDiagFlags() error {
	if c.diag.group && c.diag.noGroup {
		return usageError{"--group and --no-group disagree"}
	}
	if c.diag.count < 1 || c.diag.count > 1000 {
		return usageError{"--count must be between 1 and 1000"}
	}
	if c.diag.count > 1 && c.diag.interval <= 0 {
		return usageError{"--interval must be positive"}
	}
	return nil
}

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
func (s *session) diagnose(rp *report.Process, raw *ptrace.Process) *report.Process {
	tasks := map[int]bool{}
	if tids, err := procmaps.Tasks(raw.PID); err == nil {
		for _, t := range tids {
			tasks[t] = true
		}
	}
	if child := s.sandboxFor(raw.PID); child != nil {
		child.Locks(rp, tasks)
	} else {
		diagnose.Diagnose(rp, ptrace.MemReader{PID: raw.MemPID()}, tasks)
	}
	if s.c.diag.group || (!s.c.diag.noGroup && len(rp.Threads) > groupAuto) {
		diagnose.Group(rp)
	}
	return rp
}

// dumpSnapshots takes --count snapshots of every target, --interval
// apart, and returns the last of each (for the targets the last round
// read), its threads marked stuck, spinning or moving.
func (s *session) dumpSnapshots() ([]*report.Process, int, error) {
	c := s.c
	snaps := map[int][]diagnose.Snapshot{}
	var last map[int]*report.Process
	var failed int
	var began time.Time
	for round := 0; round < c.diag.count; round++ {
		if round > 0 {
			select {
			case <-time.After(time.Until(began.Add(c.diag.interval))):
			case <-s.cancel:
			}
		}
		began = time.Now()
		last = map[int]*report.Process{}
		final := round == c.diag.count-1
		f, err := s.captureEach(began.Add(c.timeout), func(p *ptrace.Process) (func(), error) {
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
	for _, pid := range c.pids {
		if rp := last[pid]; rp != nil {
			diagnose.Progress(rp, snaps[pid])
			procs = append(procs, rp)
		}
	}
	return procs, failed, nil
}
