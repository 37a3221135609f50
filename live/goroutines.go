//go:build linux

package live

import (
	"fmt"
	"time"

	"stackshot/goruntime"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/sandbox"
)

// GroupAutoGoroutines is the goroutine count past which goroutines are
// grouped without --group.
const GroupAutoGoroutines = 256

// addGoroutines reads a Go process's goroutines into rp (see
// goruntime.Live), grouped as the flags say.
func (s *Session) addGoroutines(p *ptrace.Process, rp *report.Process, deadline time.Time) {
	if !s.o.Goroutines {
		return
	}
	if child := s.sandboxFor(p.PID); child != nil {
		child.Goroutines(p, rp)
	} else {
		sandbox.CountInProcess(fmt.Sprintf("process %d", p.PID))
		space := s.res.Space(p, ptrace.MemReader{PID: p.MemPID()})
		goruntime.Live(p, rp, goruntime.SymbolizerFunc(s.res.Namer(space)), deadline, s.cancel)
	}
	if s.o.Group || (len(rp.Goroutines) > GroupAutoGoroutines && !s.o.NoGroup) {
		rp.GoroutineGroups = report.GroupGoroutines(rp.Goroutines)
	}
}
