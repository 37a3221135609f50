//go:build linux

package sandbox

import (
	"bytes"
	"io"
	"maps"
	"slices"
	"unsafe"

	"stackshot/ptrace"
	"stackshot/resolve"
)

// kCheckAll asks whether each of a batch of threads a capture observed
// without a stop unwinds completely: what kCheck asks per thread (a
// 128-thread dump spent most of its time in those round trips). The
// capture sends its batches as it observes (ptrace.Options.CheckAll), and
// reads the answers after: the child unwinds the first threads while the
// parent reads the others through /proc.
const kCheckAll = "checkall" // down: Threads; up: Completes, in their order

// CheckAll is Check for ptrace.Options.CheckAll: it sends a batch of a
// capture's threads to the child, and returns what reads the child's
// answer. A failed child answers none (each thread is then stopped, as
// when in doubt), and so does an answer of the wrong length.
//
// A capture's first batch asks the child, before it, for p's build ids
// and vdso (Images), and to make p, as it read them, the space its checks
// unwind in (no kSpace sending p down again); the answers are read in the
// order asked, the images' first (owed).
func (c *Child) CheckAll() ptrace.BatchCheck {
	return func(p *ptrace.Process, ths []*ptrace.Thread) func() []bool {
		none := func() []bool { return nil }
		switch c.follow(p); {
		case c.imagesOwed == p:
			// (a later batch of the capture the images are asked for)
		case c.space != p && p.BuildIDs == nil && c.dead == nil:
			if c.askImages(p) != nil {
				return none
			}
		case !c.useSpace(p):
			return none
		}
		if c.giveModules(p, ths) != nil || c.send(&downMsg{Kind: kCheckAll, Check: checkView(ths)}) != nil {
			return none
		}
		c.pending = append(c.pending, kCheckAll)
		c.checked = holdStacks(c.checked, ths)
		return func() []bool {
			up, err := c.owed(kCheckAll)
			if err != nil || len(up.Completes) != len(ths) {
				return nil
			}
			return up.Completes
		}
	}
}

// checkView is ths as a check reads them: without their kernel stacks
// (half of what a blocked thread's struct weighs in the frame; the
// resolve sends them), the structs copied and the stacks shared.
func checkView(ths []*ptrace.Thread) []*ptrace.Thread {
	out := make([]*ptrace.Thread, len(ths))
	for i, th := range ths {
		if th != nil {
			x := *th
			x.KernelStack = nil
			out[i] = &x
		}
	}
	return out
}

// askImages asks the child, without waiting, for p's build ids and vdso,
// p being then the space of its checks: the answer is owed, and is read
// (useImages, setSpace) before the next one. The maps sent are kept:
// the capture may read p's again before then (its lock is held only
// while a batch is asked).
func (c *Child) askImages(p *ptrace.Process) error {
	p.BuildIDs = map[uint64]string{}
	head := *p
	head.Threads, head.BuildIDs = nil, nil
	if !c.starting() {
		if err := c.drain(); err != nil {
			return err
		}
	}
	c.gave, c.gaveMods = nil, nil
	if err := c.send(&downMsg{Kind: kImages, Proc: &head, SpaceToo: true}); err != nil {
		return err
	}
	c.pending = append(c.pending, kImages)
	c.imagesOwed, c.imagesMaps = p, head.Maps
	return nil
}

// starting reports whether the only answer owed is the setup's: a
// capture's first batch is then sent while the child starts (sendSetup).
func (c *Child) starting() bool { return len(c.pending) == 1 && c.pending[0] == kSetup }

// checks is what the child keeps of a capture's no-stop checks: the space
// they unwind in, the process it was made of, and the stacks the kCheckAll
// requests sent, for the resolve that follows (sameCapture,
// restoreChecked).
type checks struct {
	space *resolve.Space
	proc  *ptrace.Process
	held  map[int]checkedStack
}

func (k *checks) setSpace(space *resolve.Space, p *ptrace.Process) { k.space, k.proc = space, p }

// checkAll answers kCheckAll in the child (no space yet: none complete),
// and holds the stacks it sent.
func (k *checks) checkAll(ths []*ptrace.Thread) upMsg {
	up := upMsg{Kind: kCheckAll, Completes: make([]bool, len(ths))}
	for i, th := range ths {
		if k.space != nil && th != nil {
			up.Completes[i] = k.space.CheckNoStop(th)
		}
	}
	k.held = holdStacks(k.held, ths)
	return up
}

// images answers kImages m (images), its process then the checks' space
// when it asks (SpaceToo).
func (k *checks) images(m *downMsg, res *resolve.Resolver, mem io.ReaderAt, memc *memClient) upMsg {
	up := images(m.Proc, mem)
	if m.SpaceToo {
		if memc != nil {
			memc.reset() // (as kSpace does)
		}
		k.setSpace(res.Space(m.Proc, mem), m.Proc)
	}
	return up
}

// forResolve readies kResolve m: what its request left out is put back
// (restoreRequest), its kept threads get the stacks held (which are then
// forgotten), and its process is the checks' when it is the same capture.
// false: m has no process, or does not fit what the child has.
func (k *checks) forResolve(m *downMsg) bool {
	if m.Proc == nil || !restoreRequest(m, k.proc) || !restoreChecked(m, k.held) {
		return false
	}
	k.held = nil
	m.Proc = sameCapture(k.proc, m.Proc)
	return true
}

// checkedStack is a thread's stack copy a kCheckAll sent, and its address.
type checkedStack struct {
	addr  uint64
	stack []byte
}

// holdStacks adds to held (by thread) the stacks a kCheckAll sends: the
// parent and the child each keep them so, until the next kResolve.
func holdStacks(held map[int]checkedStack, ths []*ptrace.Thread) map[int]checkedStack {
	if held == nil {
		held = map[int]checkedStack{}
	}
	for _, th := range ths {
		if th != nil {
			held[th.TID] = checkedStack{th.StackAddr, th.Stack}
		}
	}
	return held
}

// withoutChecked is p for kResolve without the stacks the child already
// holds (c.checked): the same copy, by identity (a capture replaces a
// thread's copy, never writes into it), sent in a kCheckAll since the last
// kResolve. A 512-thread dump sent its 2.5 MB of stacks twice. It returns
// p as it is when none are held, else a copy and the indexes left out.
func (c *Child) withoutChecked(p *ptrace.Process) (*ptrace.Process, []int) {
	held := c.checked
	c.checked = nil // (the child forgets them with this kResolve)
	var kept []int
	for i := range p.Threads {
		th := &p.Threads[i]
		if h, ok := held[th.TID]; ok && len(th.Stack) > 0 && len(h.stack) == len(th.Stack) &&
			unsafe.SliceData(h.stack) == unsafe.SliceData(th.Stack) && h.addr == th.StackAddr {
			kept = append(kept, i)
		}
	}
	if len(kept) == 0 {
		return p, nil
	}
	q := *p
	q.Threads = slices.Clone(p.Threads)
	for _, i := range kept {
		q.Threads[i].Stack = nil
	}
	return &q, kept
}

// restoreChecked gives m's kept threads (a kResolve's) the stacks the
// child holds from its kCheckAll requests, which it then forgets; false:
// one is not held as the parent says (the child fails).
func restoreChecked(m *downMsg, held map[int]checkedStack) bool {
	for _, i := range m.Kept {
		if m.Proc == nil || i < 0 || i >= len(m.Proc.Threads) {
			return false
		}
		th := &m.Proc.Threads[i]
		h, ok := held[th.TID]
		if !ok || h.addr != th.StackAddr || len(h.stack) == 0 || th.Stack != nil {
			return false
		}
		th.Stack = h.stack
	}
	return true
}

// sameCapture is the process a resolve (p, from the parent) works on in
// the child: the one its checks' space was made of (checked, whose
// build ids and vdso the child read) when p is that capture, with p's
// threads, so that the walks the checks made are reused (a resolver
// keeps them for that very process); else p.
func sameCapture(checked, p *ptrace.Process) *ptrace.Process {
	if checked == nil || checked.PID != p.PID || !slices.Equal(checked.Maps, p.Maps) ||
		!maps.Equal(checked.BuildIDs, p.BuildIDs) || !bytes.Equal(checked.VDSO, p.VDSO) {
		return p
	}
	keep := *checked
	*checked = *p
	checked.Maps, checked.BuildIDs, checked.VDSO = keep.Maps, keep.BuildIDs, keep.VDSO
	return checked
}
