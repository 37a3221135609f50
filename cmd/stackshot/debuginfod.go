//go:build linux

package main

import (
	"os"

	"stackshot/debuginfod"
	"stackshot/symtab"
)

// addFetchers gives the symbolizer a debuginfod client when DEBUGINFOD_URLS
// names servers and --no-debuginfod is not given: separate debug files by
// build id, and for report (a saved capture, perhaps from another machine)
// the module files themselves. Fetching happens only while symbolizing.
// The client is made once: a sandboxed child's symbolizer (whose fetches
// run here) shares it.
func (c *common) addFetchers(o *symtab.Options) {
	if c.noDebuginfod || os.Getenv("DEBUGINFOD_URLS") == "" {
		return
	}
	if c.debuginfod == nil {
		do, warnings := debuginfod.FromEnv(os.Getenv)
		if !c.quiet {
			for _, w := range warnings {
				printErr("stackshot: %s", w)
			}
		}
		do.MaxBytes = c.maxDebugBytes
		if !c.quiet {
			switch {
			case isTerminal(2):
				do.Progress, do.Terminal = os.Stderr, true
			case os.Getenv("DEBUGINFOD_PROGRESS") != "":
				do.Progress = os.Stderr
			}
		}
		c.debuginfod = debuginfod.New(do)
	}
	cl := c.debuginfod
	if !cl.Enabled() {
		return
	}
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
		printErr("stackshot: %s", w)
	}
}
