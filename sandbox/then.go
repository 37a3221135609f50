//go:build linux

package sandbox

import (
	"fmt"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"stackshot/goruntime"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// A dump asks the child, after resolving, for the lock owners (kLocks) and
// the goroutines (kGo) of the very report it just resolved: two more round
// trips, each sending that report's threads back down. Then has the child
// do both right after its resolve answer, each answered in a frame of its
// own (the names arrive first: a child that fails meanwhile costs only
// what it was doing, as before); Locks and Goroutines read those answers
// instead of asking, and check them as they check any answer.

// Then is what the child does right after a resolve.
type Then struct {
	// Locks: find the owners of the locks the resolved threads wait for;
	// Tasks lists the target's threads now (an owner must be one of
	// them: Locks is then to be given the same). It is called once the
	// request has gone, and its answer follows it (kTasks): listing a
	// 512-thread process's tasks took 0.7 ms, now spent while the child
	// resolves.
	Locks bool
	Tasks func() map[int]bool
	// Goroutines: read a Go program's goroutines (the parent opens the
	// executable, as Goroutines does; none: not asked).
	Goroutines bool
	// Flush: then hand over what is queued for the cache (as Close
	// has it do, which then does not ask again unless asked more since).
	Flush bool
}

// ResolveThen is Resolve, the child then doing what then says; Locks and
// Goroutines called next with the report it returns read the child's
// answers instead of asking again.
func (c *Child) ResolveThen(p *ptrace.Process, then Then) (*report.Process, error) {
	m := &downMsg{Kind: kResolve, Proc: p, LocksToo: then.Locks, FlushToo: then.Flush && c.nsCache != nil}
	var after func() error
	if then.Locks {
		after = func() error {
			var tasks map[int]bool
			if then.Tasks != nil {
				tasks = then.Tasks()
			}
			return c.send(&downMsg{Kind: kTasks, Tasks: sortedTasks(tasks)})
		}
	}
	fd := -1
	if then.Goroutines && c.cfg.Resolve.Live {
		if exe := goruntime.OpenExe(p); exe != nil {
			defer exe.Close()
			fd = int(exe.Fd())
		}
	}
	c.follow(p)
	rp, err := c.resolve(p, m, fd, after)
	if c.dead != nil {
		return rp, err
	}
	if then.Locks {
		c.pending = append(c.pending, kLocks)
	}
	if fd >= 0 {
		c.pending = append(c.pending, kGo)
	}
	if m.FlushToo {
		c.pending = append(c.pending, kFlush)
	}
	if err == nil {
		c.pendingFor = rp
	}
	return rp, err
}

func sortedTasks(tasks map[int]bool) []int {
	tids := make([]int, 0, len(tasks))
	for t := range tasks {
		tids = append(tids, t)
	}
	sort.Ints(tids)
	return tids
}

// awaited returns the child's answer of kind to a request ResolveThen
// made for rp; ok false: none was made (ask). The answers owed before it
// are read and dropped.
func (c *Child) awaited(rp *report.Process, kind string) (up *upMsg, ok bool, err error) {
	if up := c.kept[kind]; up != nil && rp != nil && rp == c.keptFor {
		delete(c.kept, kind)
		return up, true, nil
	}
	if rp == nil || rp != c.pendingFor || !slices.Contains(c.pending, kind) {
		return nil, false, nil
	}
	up, err = c.owed(kind)
	return up, true, err
}

// keepOwed reads the answers ResolveThen's request owes for rp and keeps
// them for awaited, so that a request made before they are asked for
// (RuntimeFrames) does not drop them (drain). A failed child keeps none:
// its failure is met by the next request.
func (c *Child) keepOwed(rp *report.Process) {
	if rp == nil || rp != c.pendingFor {
		return
	}
	c.kept, c.keptFor = map[string]*upMsg{}, rp
	for len(c.pending) > 0 {
		up, err := c.nextOwed()
		if err != nil {
			return
		}
		c.kept[up.Kind] = up
	}
}

// drain reads the answers still owed (ResolveThen's, or a capture's
// checks not read) before another request is made; they are dropped,
// but for the images, which are used (nextOwed).
func (c *Child) drain() error {
	c.pendingFor = nil
	for len(c.pending) > 0 {
		if _, err := c.nextOwed(); err != nil {
			return err
		}
	}
	return nil
}

// nextOwed reads the next answer owed, of the first pending kind (another
// kind: the conversation is out of step, the child is failed). An owed
// kImages answer is used as it is read (askImages); the setup's is read
// by readStart.
func (c *Child) nextOwed() (*upMsg, error) {
	k := c.pending[0]
	if k == kSetup {
		if c.readStart(); c.startErr != nil {
			return nil, c.startErr
		}
		return &upMsg{Kind: kSetup}, nil
	}
	c.pending = c.pending[1:]
	up, err := c.receive(c.killAt())
	if err == nil && up.Kind != k {
		c.fail(fmt.Errorf("answer %q for %q", up.Kind, k), false)
		err = c.dead
	}
	if err != nil {
		c.pending, c.pendingFor, c.imagesOwed = nil, nil, nil
		return nil, err
	}
	switch k {
	case kFlush:
		c.unflushed = false
	case kImages:
		if p := c.imagesOwed; p != nil {
			c.imagesOwed = nil
			useImages(p, c.imagesMaps, up)
			c.setSpace(p, c.imagesMaps)
			// (mid-capture: of the modules given, not of p's threads yet;
			// its failure is the child's, which the next request meets)
			c.giveDebug(p, c.gaveMods)
		}
	}
	return up, nil
}

// owed reads the answers owed up to the first of kind, and returns it.
func (c *Child) owed(kind string) (*upMsg, error) {
	for len(c.pending) > 0 {
		up, err := c.nextOwed()
		if err != nil || up.Kind == kind {
			return up, err
		}
	}
	return nil, fmt.Errorf("no %q answer owed", kind)
}

// resolveThen does, in the child, what kResolve's request asks after its
// answer was sent: res's threads (th, as resolved, frames in place) are
// diagnosed (with the target's tasks from the kTasks frame that follows
// the request), then the goroutines read (exe: the
// executable handed over, -1: none), then the cache flushed. false: the
// parent is gone, or sent something else.
func resolveThen(cfg *setup, cl *client, m *downMsg, th []report.Thread, exe int, sym *symtab.Symbolizer, res *resolve.Resolver, memc *memClient) bool {
	head := *m.Proc
	head.Threads = nil
	if m.LocksToo {
		t, fd, err := cl.next()
		if fd >= 0 {
			unix.Close(fd)
		}
		if err != nil || t.Kind != kTasks {
			if exe >= 0 {
				unix.Close(exe)
			}
			return false
		}
		m.Tasks = t.Tasks
	}
	if m.LocksToo {
		var blocked []report.Thread
		for i := range th {
			if sc := th[i].Syscall; sc != nil && sc.InCall && sc.Name == "futex" {
				blocked = append(blocked, th[i])
			}
		}
		var up upMsg
		if memc != nil {
			memc.reset()
		}
		up, _ = serveWork(cfg, &downMsg{Kind: kLocks, Proc: &head, report: &report.Process{Threads: blocked}, Tasks: m.Tasks}, -1, sym, res, memc)
		if err := sendUp(childSock, &up); err != nil {
			if exe >= 0 {
				unix.Close(exe)
			}
			return false
		}
	}
	if exe >= 0 {
		if memc != nil {
			memc.reset()
		}
		up, _ := serveWork(cfg, &downMsg{Kind: kGo, Proc: &head, report: &report.Process{Threads: th}}, exe, sym, res, memc)
		if err := sendUp(childSock, &up); err != nil {
			return false
		}
	}
	if m.FlushToo {
		flush(sym)
		if err := sendUp(childSock, &upMsg{Kind: kFlush}); err != nil {
			return false
		}
	}
	return true
}
