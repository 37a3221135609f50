//go:build linux

package main

import (
	"fmt"

	"stackshot/internal/arch"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
)

// The parsing of what a target controls runs in a sandboxed child (see
// package sandbox) for targets owned by another user than stackshot's
// (root dumping a service account's process) and for every capture file
// report reads; --no-sandbox keeps it in-process, STACKSHOT_SANDBOX=1
// asks for it for every target.

// sandboxConfig is the child's configuration from the flags.
func (c *common) sandboxConfig(opts resolve.Options) sandbox.Config {
	cfg := sandbox.Config{Resolve: opts}
	cfg.Symtab.DebugDirs, cfg.Symtab.NoDemangle, cfg.Symtab.NamesOnly = c.debugDirs, c.noDemangle, c.namesOnly()
	cfg.Symtab.MaxDebugBytes, cfg.Symtab.PerfMap = c.maxDebugBytes, c.perfMap
	c.addFetchers(&cfg.Symtab) // (run here when the child asks: it has no network)
	if c.timeout > 0 {
		cfg.Deadline = c.started.Add(c.timeout)
	}
	return cfg
}

// startSandbox starts a child for target t, or says in one line why the
// parsing stays in-process (nil).
func (c *common) startSandbox(opts resolve.Options, t sandbox.Target, what string) *sandbox.Child {
	child, err := sandbox.Start(c.sandboxConfig(opts), t)
	if err != nil {
		if !c.quiet {
			printErr("stackshot: %s is parsed inside stackshot itself (%v; --no-sandbox says this is intended)", what, err)
		}
		return nil
	}
	return child
}

// noteSandbox keeps what a child's symbolizer could not do, for
// symbolizerNotes.
func (c *common) noteSandbox(child *sandbox.Child) {
	c.boxExpired = c.boxExpired || child.Expired()
	c.boxBudget = c.boxBudget || child.BudgetExceeded()
}

// sandboxFor returns the child that parses live process pid's bytes
// (started on first use), or nil when they are parsed in-process.
//
// The decision is taken once per target, at its first capture.
func (s *session) sandboxFor(pid int) *sandbox.Child {
	if child, ok := s.boxes[pid]; ok {
		return child
	}
	var child *sandbox.Child
	if !s.c.noSandbox && sandbox.Needed(pid) {
		t, err := sandbox.TargetOf(pid)
		if err != nil {
			t = sandbox.Target{PID: pid, UID: -1, GID: -1} // owner unknown: anyone's files only
		}
		child = s.c.startSandbox(s.res.Options(), t, fmt.Sprintf("process %d", pid))
	}
	if s.boxes == nil {
		s.boxes = map[int]*sandbox.Child{}
	}
	s.boxes[pid] = child
	return child
}

// closeSandboxes ends the session's children.
func (s *session) closeSandboxes() {
	for pid, child := range s.boxes {
		if child != nil {
			child.Close()
		}
		delete(s.boxes, pid)
	}
}

// captureLive is resolve.CaptureLive, with the no-stop check (which
// unwinds the thread) and the build ids read from memory (ELF notes) in the
// target's child when it has one.
func (s *session) captureLive(pid int, opt ptrace.Options) (*ptrace.Process, error) {
	child := s.sandboxFor(pid)
	if child == nil {
		return s.res.CaptureLive(pid, opt)
	}
	p, err := ptrace.Capture(pid, opt, child.Check())
	if err != nil {
		return nil, err
	}
	if err := child.Images(p); err != nil {
		s.warn("%v", err)
	}
	return p, nil
}

// resolveCaptured unwinds and symbolizes a live capture: in its child
// when it has one (a failed child costs the process its names, said in
// one line), else in-process.
func (s *session) resolveCaptured(p *ptrace.Process) (*report.Process, error) {
	child := s.sandboxFor(p.PID)
	if child == nil {
		return resolveProcess(s.res, p, ptrace.MemReader{PID: p.MemPID()})
	}
	rp, err := child.Resolve(p)
	if err != nil {
		s.warn("%v", err)
	}
	s.c.noteSandbox(child)
	return rp, nil
}

// sandboxLookup names addresses of a live process in a child (symbolize
// -p); nil when they are named in-process.
func (c *common) sandboxLookup(pid int) (func(uint64) []report.Frame, func(), error) {
	if c.noSandbox || !sandbox.Needed(pid) {
		return nil, nil, nil
	}
	t, err := sandbox.TargetOf(pid)
	if err != nil {
		return nil, nil, explainCaptureError(pid, err)
	}
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		return nil, nil, explainCaptureError(pid, err)
	}
	child := c.startSandbox(resolve.Options{Live: true}, t, fmt.Sprintf("process %d", pid))
	if child == nil {
		return nil, nil, nil
	}
	p := &ptrace.Process{Arch: arch.AMD64, PID: pid, Maps: maps}
	if err := child.Images(p); err != nil && !c.quiet {
		printErr("stackshot: %v", err)
	}
	warned := false
	return func(addr uint64) []report.Frame {
		fr, err := child.Symbolize(p, []uint64{addr})
		if err != nil && !warned && !c.quiet {
			warned = true
			printErr("stackshot: %v", err)
		}
		return fr[0]
	}, func() { child.Close() }, nil
}
