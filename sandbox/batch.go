//go:build linux

package sandbox

import (
	"stackshot/ptrace"
	"stackshot/resolve"
)

// kCheckAll asks, in one round trip, whether each of the threads a
// capture observed without a stop unwinds completely: what kCheck asks
// per thread (a 128-thread dump spent most of its time in those round
// trips).
const kCheckAll = "checkall" // down: Threads; up: Completes, in their order

// CheckAll is Check for ptrace.Options.CheckAll: one request for all the
// threads of a capture's round. A failed child answers none (each thread
// is then stopped, as when in doubt), and so does an answer of the wrong
// length.
func (c *Child) CheckAll() func(p *ptrace.Process, ths []*ptrace.Thread) []bool {
	return func(p *ptrace.Process, ths []*ptrace.Thread) []bool {
		if !c.useSpace(p) {
			return nil
		}
		up, err := c.roundTrip(&downMsg{Kind: kCheckAll, Check: ths}, c.killAt())
		if err != nil || up.Kind != kCheckAll || len(up.Completes) != len(ths) {
			return nil
		}
		return up.Completes
	}
}

// checkAll answers kCheckAll in the child (no space yet: none complete).
func checkAll(space *resolve.Space, ths []*ptrace.Thread) upMsg {
	up := upMsg{Kind: kCheckAll, Completes: make([]bool, len(ths))}
	for i, th := range ths {
		if space != nil && th != nil {
			up.Completes[i] = space.CheckNoStop(th)
		}
	}
	return up
}
