//go:build linux

package main

import (
	"fmt"
	"os"
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
// process_vm_readv: no thread is stopped for it.
func (s *session) diagnose(rp *report.Process, raw *ptrace.Process) *report.Process {
	tasks := map[int]bool{}
	if tids, err := procmaps.Tasks(raw.PID); err == nil {
		for _, t := range tids {
			tasks[t] = true
		}
	}
	diagnose.Diagnose(rp, ptrace.MemReader{PID: raw.MemPID()}, tasks)
	if s.c.diag.group || (!s.c.diag.noGroup && len(rp.Threads) > groupAuto) {
		diagnose.Group(rp)
	}
	return rp
}

// dumpSnapshots is dump with --count N: N snapshots of every target, the
// report being the last one with each thread's progress.
func (s *session) dumpSnapshots() ([]*report.Process, int) {
	c := s.c
	snaps := map[int][]diagnose.Snapshot{}
	last := map[int]*report.Process{}
	lastRaw := map[int]*ptrace.Process{}
	failed := map[int]bool{}
	began := map[int]time.Time{} // when each target's last snapshot began
	for round := 0; round < c.diag.count && !s.interrupted(); round++ {
		for _, pid := range c.pids {
			if failed[pid] || s.interrupted() {
				continue
			}
			// Each target's snapshots begin --interval apart (a slow one
			// shortens the wait; several targets do not).
			if t, ok := began[pid]; ok {
				select {
				case <-time.After(time.Until(t.Add(c.diag.interval))):
				case <-s.cancel:
					continue
				}
			}
			began[pid] = time.Now()
			p, err := s.capture(pid, began[pid].Add(c.timeout))
			if err != nil {
				fmt.Fprintf(os.Stderr, "stackshot: %v\n", err)
				failed[pid] = true
				continue
			}
			rp := s.res.Process(p, ptrace.MemReader{PID: p.MemPID()})
			snaps[pid] = append(snaps[pid], diagnose.Sample(rp, cpuTimes(pid, rp)))
			last[pid], lastRaw[pid] = rp, p
		}
	}
	var procs []*report.Process
	for _, pid := range c.pids {
		rp := last[pid]
		if rp == nil || failed[pid] {
			continue
		}
		if missing := missingThreads(c.tids, lastRaw[pid]); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "stackshot: no thread %s in process %d (list its threads with 'ls /proc/%d/task')\n",
				joinInts(missing), pid, pid)
		}
		s.diagnose(rp, lastRaw[pid])
		diagnose.Progress(rp, snaps[pid])
		procs = append(procs, rp)
	}
	return procs, len(failed)
}
