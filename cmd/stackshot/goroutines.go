//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/goruntime"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
)

// autoGroupGoroutines is the goroutine count past which goroutines are
// grouped without --group.
const autoGroupGoroutines = 256

// goroutineFlags registers --goroutines / --no-goroutines.
func goroutineFlags(c *common) {
	c.fs.BoolVar(&c.goroutines, "goroutines", true, "list the goroutines of Go processes")
	c.fs.BoolVar(&c.noGoroutines, "no-goroutines", false, "no goroutines")
}

// flagSet reports whether a boolean flag is defined and true (--group
// and --no-group belong to the grouping of stacks).
func (c *common) flagSet(name string) bool {
	f := c.fs.Lookup(name)
	return f != nil && f.Value.String() == "true"
}

// addGoroutines reads a Go process's goroutines into rp, after every
// thread runs again: no ptrace stop, only memory reads, within the
// command's deadline. A process that is not a Go program is left as it is.
func (s *session) addGoroutines(p *ptrace.Process, rp *report.Process, deadline time.Time) {
	if !s.c.goroutines || s.c.noGoroutines {
		return
	}
	var exe *procmaps.Mapping
	for i := range p.Maps {
		m := &p.Maps[i]
		if m.Kind == procmaps.KindFile && m.Path == p.Exe && (exe == nil || m.Start < exe.Start) {
			exe = m
		}
	}
	if exe == nil {
		return
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/exe", p.MemPID()))
	if err != nil {
		return
	}
	defer f.Close()
	bias, ok := goruntime.LoadBias(f, exe.Start, exe.Offset)
	if !ok {
		return
	}
	mem := ptrace.MemReader{PID: p.MemPID()}
	rt, err := goruntime.Open(goruntime.Target{Mem: mem, Exe: f, Bias: bias})
	var unknown *goruntime.UnknownVersionError
	switch {
	case errors.Is(err, goruntime.ErrNotGo):
		return
	case errors.As(err, &unknown):
		rp.Runtime = &report.Runtime{Name: "go", Version: unknown.Version}
		rp.Warnings = append(rp.Warnings, unknown.Error())
		return
	case err != nil:
		rp.Runtime = &report.Runtime{Name: "go"}
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("goroutines not read (%v)", err))
		return
	}
	rp.Runtime = &report.Runtime{Name: "go", Version: rt.Version}
	rt.Deadline, rt.Cancel = deadline, s.cancel
	snap, err := rt.Goroutines()
	if err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("goroutines not read (%v)", err))
		return
	}
	var ts unix.Timespec
	now := int64(0)
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
		now = ts.Nano()
	}
	space := s.res.Space(p, mem)
	sym := goruntime.SymbolizerFunc(func(pc uint64, exact bool) []report.Frame {
		return s.res.Symbolize(space, pc, exact)
	})
	rp.Goroutines = snap.Report(sym, now, rp.Threads)
	rp.GoroutinesSkipped = snap.Skipped
	if snap.Skipped > 0 {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("goroutines not shown: %d changed while they were read", snap.Skipped))
	}
	if s.c.flagSet("group") || (len(rp.Goroutines) > autoGroupGoroutines && !s.c.flagSet("no-group")) {
		rp.GoroutineGroups = report.GroupGoroutines(rp.Goroutines)
	}
}
