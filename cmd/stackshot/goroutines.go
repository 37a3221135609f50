//go:build linux

package main

import (
	"time"

	"stackshot/goruntime"
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

// addGoroutines reads a Go process's goroutines into rp (see
// goruntime.Live), grouped as the flags say.
func (s *session) addGoroutines(p *ptrace.Process, rp *report.Process, deadline time.Time) {
	if !s.c.goroutines || s.c.noGoroutines {
		return
	}
	if child := s.sandboxFor(p.PID); child != nil {
		child.Goroutines(p, rp)
	} else {
		space := s.res.Space(p, ptrace.MemReader{PID: p.MemPID()})
		goruntime.Live(p, rp, goruntime.SymbolizerFunc(s.res.Namer(space)), deadline, s.cancel)
	}
	if s.c.diag.group || (len(rp.Goroutines) > autoGroupGoroutines && !s.c.diag.noGroup) {
		rp.GoroutineGroups = report.GroupGoroutines(rp.Goroutines)
	}
}
