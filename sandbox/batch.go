//go:build linux

package sandbox

import (
	"fmt"

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
		var up *upMsg
		var err error
		if c.follow(p); c.space != p && p.BuildIDs == nil && c.dead == nil {
			up, err = c.imagesThenCheck(p, ths)
		} else {
			if !c.useSpace(p) {
				return nil
			}
			up, err = c.roundTrip(&downMsg{Kind: kCheckAll, Check: ths}, c.killAt())
		}
		if err != nil || up.Kind != kCheckAll || len(up.Completes) != len(ths) {
			return nil
		}
		return up.Completes
	}
}

// imagesThenCheck is a capture's first check: the child is asked for
// p's build ids and vdso (Images) and to make p, as it read them, the
// space its checks unwind in (no kSpace sending p down again), and the
// check is sent behind it without waiting: one round trip for both.
func (c *Child) imagesThenCheck(p *ptrace.Process, ths []*ptrace.Thread) (*upMsg, error) {
	p.BuildIDs = map[uint64]string{}
	head := *p
	head.Threads, head.BuildIDs = nil, nil
	if err := c.drain(); err != nil {
		return nil, err
	}
	if err := c.send(&downMsg{Kind: kImages, Proc: &head, SpaceToo: true}); err != nil {
		return nil, err
	}
	if err := c.send(&downMsg{Kind: kCheckAll, Check: ths}); err != nil {
		return nil, err
	}
	up, err := c.receive(c.killAt())
	if err == nil && up.Kind != kImages {
		c.fail(fmt.Errorf("answer %q for %q", up.Kind, kImages), false)
		err = c.dead
	}
	if err != nil {
		return nil, err
	}
	useImages(p, up)
	c.space = p
	return c.receive(c.killAt())
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
