//go:build linux

package main

import (
	"os"

	"stackshot/debuginfod"
	"stackshot/internal/term"
	"stackshot/symtab"
)

// addFetchers gives the symbolizer a debuginfod client when DEBUGINFOD_URLS
// names servers and --no-debuginfod is not given: separate debug files by
// build id, and for report (a saved capture, perhaps from another machine)
// the module files themselves. Fetching happens only while symbolizing.
func (c *common) addFetchers(o *symtab.Options) {
	if c.noDebuginfod || os.Getenv("DEBUGINFOD_URLS") == "" {
		return
	}
	cl := debuginfod.Setup(os.Getenv, c.maxDebugBytes, c.quiet, term.IsTerminal(2), os.Stderr, c.say)
	if cl == nil {
		return
	}
	c.debuginfod = cl
	o.FetchDebug = cl.Debuginfo
	if c.fs.Name() == "report" {
		o.FetchExecutable = cl.Executable
	}
}

// debuginfodNotes says on stderr which servers failed.
func (c *common) debuginfodNotes() {
	if c.quiet || c.debuginfod == nil {
		return
	}
	for _, w := range c.debuginfod.Warnings() {
		c.say(w)
	}
}
