//go:build linux

package live

import (
	"fmt"
	"time"

	"stackshot/internal/contain"
	"stackshot/ptrace"
)

// Capture takes one raw snapshot of pid, with build ids and the vdso, its
// error in the contract's words. A panic (a bug met on the target's bytes,
// e.g. its build id notes) becomes this process's error: the other
// processes of the command go on. The capture detaches every thread on
// its way out, panic or not.
func (s *Session) Capture(pid int, deadline time.Time) (p *ptrace.Process, err error) {
	if perr := contain.Call(fmt.Sprintf("capturing process %d", pid), func() { p, err = s.capture(pid, deadline) }); perr != nil {
		return nil, fmt.Errorf("cannot read process %d (%v)", pid, perr)
	}
	return p, err
}
