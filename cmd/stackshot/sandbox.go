//go:build linux

package main

import (
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

// say writes one line on stderr.
func (c *common) say(msg string) { printErr("stackshot: %s", msg) }
