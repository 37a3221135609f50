//go:build linux

package main

import (
	"fmt"

	"stackshot/internal/arch"
	"stackshot/live"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
)

// The parsing of what a target controls runs in a sandboxed child (see
// package sandbox) for every capture file report reads, and for live
// targets as package live decides; --no-sandbox keeps it in-process.

// sandboxConfig is the child's configuration from the flags.
func (c *common) sandboxConfig(opts resolve.Options) sandbox.Config {
	cfg := sandbox.Config{Resolve: opts}
	cfg.Symtab.DebugDirs, cfg.Symtab.NoDemangle, cfg.Symtab.NamesOnly = c.debugDirs, c.noDemangle, c.namesOnly()
	cfg.Symtab.MaxDebugBytes, cfg.Symtab.PerfMap = c.maxDebugBytes, c.perfMap
	if c.timeout > 0 {
		cfg.Deadline = c.started.Add(c.timeout)
	}
	return cfg
}

// say writes one line on stderr; sayUnlessQuiet, unless -q.
func (c *common) say(msg string) { printErr("stackshot: %s", msg) }

func (c *common) sayUnlessQuiet(msg string) {
	if !c.quiet {
		c.say(msg)
	}
}

// noteSandbox keeps what a child's symbolizer could not do, for
// symbolizerNotes.
func (c *common) noteSandbox(child *sandbox.Child) {
	c.boxExpired = c.boxExpired || child.Expired()
	c.boxBudget = c.boxBudget || child.BudgetExceeded()
}

// sandboxLookup names addresses of a live process in a child (symbolize
// -p); nil when they are named in-process.
func (c *common) sandboxLookup(pid int) (func(uint64) []report.Frame, func(), error) {
	if c.noSandbox || !sandbox.Needed(pid) {
		return nil, nil, nil
	}
	t, err := sandbox.TargetOf(pid)
	if err != nil {
		return nil, nil, live.ExplainCaptureError(pid, err)
	}
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		return nil, nil, live.ExplainCaptureError(pid, err)
	}
	child := sandbox.TryStart(c.sandboxConfig(resolve.Options{Live: true}), t, fmt.Sprintf("process %d", pid), c.sayUnlessQuiet)
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
