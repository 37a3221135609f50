//go:build linux

package live

import (
	"fmt"

	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/sandbox"
)

// The parsing of what a target controls runs in a sandboxed child (see
// package sandbox) for targets owned by another user than stackshot's
// (root dumping a service account's process); Options.NoSandbox keeps it
// in-process, STACKSHOT_SANDBOX=1 asks for it for every target.

// sayUnlessQuiet says msg unless Quiet (not once only: see Warn).
func (s *Session) sayUnlessQuiet(msg string) {
	if !s.o.Quiet {
		s.o.Say(msg)
	}
}

// sandboxFor returns the child that parses live process pid's bytes
// (started on first use), or nil when they are parsed in-process.
//
// The decision is taken once per target, at its first capture.
func (s *Session) sandboxFor(pid int) *sandbox.Child {
	if child, ok := s.boxes[pid]; ok {
		return child
	}
	var child *sandbox.Child
	if l := s.launchSandbox(pid); l != nil {
		// (said as a warning: the failed child's errors repeat the line)
		child = l.Child(fmt.Sprintf("process %d", pid), func(line string) { s.Warn("%s", line) })
		delete(s.launching, pid)
	}
	if s.boxes == nil {
		s.boxes = map[int]*sandbox.Child{}
	}
	s.boxes[pid] = child
	return child
}

// Sandbox is the child that parses live process pid's bytes (started on
// first use), or nil when they are parsed in-process: record's sampler
// unwinds and names there.
func (s *Session) Sandbox(pid int) *sandbox.Child { return s.sandboxFor(pid) }

// anyBox reports whether f holds for one of the session's children (what
// record's sampler had them do is not seen by resolveCaptured).
func (s *Session) anyBox(f func(*sandbox.Child) bool) bool {
	for _, child := range s.boxes {
		if child != nil && f(child) {
			return true
		}
	}
	return false
}

// launchSandbox starts, in the background, the child that is to parse
// live process pid's bytes, when it needs one and none was decided yet:
// what is being started for it (nil: none). sandboxFor waits for it.
func (s *Session) launchSandbox(pid int) *sandbox.Launching {
	if _, ok := s.boxes[pid]; ok {
		return nil
	}
	if l, ok := s.launching[pid]; ok {
		return l
	}
	if s.o.NoSandbox || !sandbox.Needed(pid) {
		return nil
	}
	t, err := sandbox.TargetOf(pid)
	if err != nil {
		t = sandbox.Target{PID: pid, UID: -1, GID: -1} // owner unknown: anyone's files only
	}
	cfg := s.o.Sandbox
	cfg.Resolve = s.res.Options()
	if s.launching == nil {
		s.launching = map[int]*sandbox.Launching{}
	}
	s.launching[pid] = sandbox.Launch(cfg, t)
	return s.launching[pid]
}

// Close ends the session's sandboxed children and its catching of
// signals.
func (s *Session) Close() {
	if s.stopSignals != nil {
		s.stopSignals()
	}
	for pid, l := range s.launching {
		// (ended as it is: one that did not start is not started again
		// only to be closed)
		if child := l.Early(); child != nil {
			child.Close()
		}
		delete(s.launching, pid)
	}
	for pid, child := range s.boxes {
		if child != nil {
			child.Close()
		}
		delete(s.boxes, pid)
	}
}

// captureLive is resolve.CaptureLive, with the no-stop check (which
// unwinds the thread; threads in batches, sent as they are observed) and
// the build ids read from memory (ELF notes) in the target's child when it
// has one.
//
// A child not started yet is started in the background, its start
// overlapping the capture's /proc reads; the first batch is sent without
// waiting for it to be ready (it is read once it is). When it never
// becomes ready, its checks go unanswered and those threads are stopped,
// as when in doubt: nothing of the target is parsed in-process.
func (s *Session) captureLive(pid int, opt ptrace.Options) (*ptrace.Process, error) {
	if s.launchSandbox(pid) == nil && s.boxes[pid] == nil {
		sandbox.CountInProcess(fmt.Sprintf("process %d", pid))
		return s.res.CaptureLive(pid, opt)
	}
	var early *sandbox.Child // (the child the checks were asked of)
	opt.CheckAll = func(p *ptrace.Process, ths []*ptrace.Thread) func() []bool {
		if early = s.earlyBox(pid); early == nil {
			return func() []bool { return nil }
		}
		return early.CheckAll()(p, ths)
	}
	p, err := ptrace.Capture(pid, opt, nil)
	if err != nil {
		return nil, err
	}
	child := s.sandboxFor(pid)
	if child != early && len(p.BuildIDs) == 0 {
		p.BuildIDs = nil // (asked of a child that never started: its successor reads them)
	}
	if err := child.Images(p); err != nil {
		s.Warn("%v", err)
	}
	return p, nil
}

// earlyBox is the child that is to parse live process pid's bytes, for a
// capture's checks: one being started is returned before it is ready
// (sandbox.Launching.Early). nil: none (or it could not be started).
func (s *Session) earlyBox(pid int) *sandbox.Child {
	if child, ok := s.boxes[pid]; ok {
		return child
	}
	if l := s.launching[pid]; l != nil {
		return l.Early()
	}
	return nil
}

// resolveCaptured unwinds and symbolizes a live capture: in its child
// when it needs one (a failed child, or one that never started, costs the
// process its names, said in one line), else in-process.
func (s *Session) resolveCaptured(p *ptrace.Process) (*report.Process, error) {
	child := s.sandboxFor(p.PID)
	if child == nil {
		sandbox.CountInProcess(fmt.Sprintf("process %d", p.PID))
		return s.res.SafeProcess(p, ptrace.MemReader{PID: p.MemPID()})
	}
	return s.resolveBoxed(child, p, sandbox.Then{}), nil
}

// resolveBoxed resolves p in its child, which then does what then says.
func (s *Session) resolveBoxed(child *sandbox.Child, p *ptrace.Process, then sandbox.Then) *report.Process {
	rp, err := child.ResolveThen(p, then)
	if err != nil {
		s.Warn("%v", err)
	}
	s.boxExpired = s.boxExpired || child.Expired()
	s.boxBudget = s.boxBudget || child.BudgetExceeded()
	return rp
}
