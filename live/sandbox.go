//go:build linux

package live

import (
	"fmt"

	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
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
		child = l.Child(fmt.Sprintf("process %d", pid), s.sayUnlessQuiet)
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
	for pid := range s.launching {
		s.sandboxFor(pid)
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
// becomes ready, the checks and the build ids are done in-process, as
// when no child is needed.
func (s *Session) captureLive(pid int, opt ptrace.Options) (*ptrace.Process, error) {
	if s.launchSandbox(pid) == nil && s.boxes[pid] == nil {
		return s.res.CaptureLive(pid, opt)
	}
	var inProcess *resolve.Space
	var spaceOf *ptrace.Process // (the process inProcess was made of)
	checkHere := func(p *ptrace.Process, ths []*ptrace.Thread) []bool {
		if inProcess == nil {
			mem := ptrace.MemReader{PID: p.MemPID()}
			resolve.CollectImages(p, mem)
			inProcess, spaceOf = s.res.Space(p, mem), p
		}
		ok := make([]bool, len(ths))
		for i, th := range ths {
			ok[i] = inProcess.CheckNoStop(th)
		}
		return ok
	}
	opt.CheckAll = func(p *ptrace.Process, ths []*ptrace.Thread) func() []bool {
		child := s.earlyBox(pid)
		if child == nil {
			ok := checkHere(p, ths)
			return func() []bool { return ok }
		}
		answers := child.CheckAll()(p, ths)
		// The answer is read without the capture's lock on its maps
		// (an observer may read them again meanwhile): a child that never
		// started is replaced by a check of the process as it was asked.
		asked := *p
		return func() []bool {
			ok := answers()
			if ok == nil && child.Started() != nil {
				ok = checkHere(&asked, ths) // (nothing was parsed there)
			}
			return ok
		}
	}
	p, err := ptrace.Capture(pid, opt, nil)
	if err != nil {
		return nil, err
	}
	if child := s.sandboxFor(pid); child == nil {
		if spaceOf != p {
			resolve.CollectImages(p, ptrace.MemReader{PID: p.MemPID()})
		}
	} else if err := child.Images(p); err != nil {
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
// when it has one (a failed child costs the process its names, said in
// one line), else in-process.
func (s *Session) resolveCaptured(p *ptrace.Process) (*report.Process, error) {
	child := s.sandboxFor(p.PID)
	if child == nil {
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
