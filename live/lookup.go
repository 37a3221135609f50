//go:build linux

package live

import (
	"fmt"

	"stackshot/internal/arch"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
	"stackshot/symtab"
)

// Lookup names addresses of live process pid (symbolize -p): in a
// sandboxed child when its bytes are parsed in one (as for a capture),
// else in-process with the symbolizer newSym makes. done, when not nil,
// ends the child once the lookups are over. Options gives Sandbox,
// NoSandbox, Quiet and Say.
func Lookup(pid int, newSym func() *symtab.Symbolizer, o Options) (lookup func(uint64) []report.Frame, done func(), err error) {
	s := &Session{o: o}
	if !o.NoSandbox && sandbox.Needed(pid) {
		t, err := sandbox.TargetOf(pid)
		if err != nil {
			return nil, nil, ExplainCaptureError(pid, err)
		}
		maps, err := procmaps.ReadMaps(pid)
		if err != nil {
			return nil, nil, ExplainCaptureError(pid, err)
		}
		cfg := o.Sandbox
		cfg.Resolve = resolve.Options{Live: true}
		// (a child that never starts names nothing: said once)
		child := sandbox.TryStart(cfg, t, fmt.Sprintf("process %d", pid), s.sayUnlessQuiet)
		if child.NeverStarted() {
			return func(addr uint64) []report.Frame { return []report.Frame{{PC: addr, Kind: "user"}} }, nil, nil
		}
		return s.childLookup(child, &ptrace.Process{Arch: arch.Host, PID: pid, Maps: maps}), func() { child.Close() }, nil
	}
	sandbox.CountInProcess(fmt.Sprintf("process %d", pid))
	res := resolve.NewResolver(newSym(), resolve.Options{Live: true})
	space, err := res.LiveSpace(pid)
	if err != nil {
		return nil, nil, ExplainCaptureError(pid, err)
	}
	return func(addr uint64) []report.Frame { return res.Symbolize(space, addr, true) }, nil, nil
}

// childLookup names p's addresses in child, saying its first error only.
func (s *Session) childLookup(child *sandbox.Child, p *ptrace.Process) func(uint64) []report.Frame {
	if err := child.Images(p); err != nil {
		s.sayUnlessQuiet(err.Error())
	}
	warned := false
	return func(addr uint64) []report.Frame {
		fr, err := child.Symbolize(p, []uint64{addr})
		if err != nil && !warned {
			warned = true
			s.sayUnlessQuiet(err.Error())
		}
		return fr[0]
	}
}
