//go:build linux

package main

// From the flags to the options of the packages that do the work.

import (
	"context"
	"fmt"
	"os"

	"stackshot/debuginfod"
	"stackshot/internal/cli"
	"stackshot/internal/diskcache"
	"stackshot/internal/term"
	"stackshot/live"
	"stackshot/ptrace"
	"stackshot/resolve"
	"stackshot/sandbox"
	"stackshot/symtab"
)

// namesOnly reports whether the output needs function names only: plain
// text without -s or -i (dump and report). Then debug info is not loaded,
// which for a large debug file is most of a dump's time.
func (c *common) namesOnly() bool {
	switch c.fs.Name() {
	case "record", "symbolize":
		return false // profiles keep file:line; symbolize prints it
	}
	return (c.format == "" || c.format == "text") && !c.source && !c.inline
}

// newSession is the live session the flags ask for; sampling (record)
// compiles each module's CFI whole, which pays off over many samples.
func (c *common) newSession(sampling bool) *live.Session {
	mode, _ := ptrace.ParseMode(c.mode)
	ropts := resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel, Live: true, KernelAddrs: c.format == "json", Sampler: sampling, NoJava: c.noJava}
	o := live.Options{Resolve: ropts, Sandbox: c.sandboxConfig(ropts), NoSandbox: c.noSandbox,
		Started: c.started, Timeout: c.timeout, Quiet: c.quiet, Goroutines: c.goroutines && !c.noGoroutines,
		Group: c.group, NoGroup: c.noGroup, Count: c.count, Interval: c.interval, NoPython: c.noPython, Say: cli.Say}
	o.Capture.Mode, o.Capture.Consistent, o.Capture.StackBytes = mode, c.consistent, c.stackBytes
	o.Capture.Kernel, o.Capture.TIDs = c.kernel, c.tids
	sym := c.newSymbolizer() // (sets c.debuginfod)
	o.Debuginfod = c.debuginfod
	return live.New(sym, o)
}

// symtabOptions are the symbolizer's options from the flags, without
// fetchers or context (the sandboxed children's too).
func (c *common) symtabOptions() symtab.Options {
	return symtab.Options{DebugDirs: c.debugDirs, NoDemangle: c.noDemangle, NamesOnly: c.namesOnly(),
		MaxDebugBytes: c.maxDebugBytes, PerfMap: c.perfMap}
}

// newSymbolizer is the symbolizer the flags ask for; --timeout bounds it
// too (what is not resolved in time is shown unresolved).
func (c *common) newSymbolizer() *symtab.Symbolizer {
	o := c.symtabOptions()
	c.addFetchers(&o)
	if dc := diskcache.Shared(c.noCache, c.quiet, cli.Say); dc != nil {
		o.Cache = dc
	}
	if c.timeout > 0 {
		o.Context, c.cancelSym = context.WithDeadline(context.Background(), c.started.Add(c.timeout))
	}
	sym := symtab.New(o)
	flushAtExit = append(flushAtExit, sym)
	return sym
}

var flushAtExit []*symtab.Symbolizer // their decoded tables go to the cache when the command is done

// symbolizerNotes says on stderr what the symbolizer (a session's, with
// its children's) could not do.
func (c *common) symbolizerNotes(sym interface {
	Expired() bool
	BudgetExceeded() bool
}) {
	if c.quiet {
		return
	}
	for _, w := range c.debuginfod.Warnings() { // servers that failed
		cli.Say(w)
	}
	if sym.Expired() {
		cli.Say(fmt.Sprintf("some frames are shown unresolved (symbolization did not finish within --timeout %v; give a longer --timeout)", c.timeout))
	}
	if sym.BudgetExceeded() {
		cli.Say("some modules show fewer names (their symbols and debug info exceed the budget; raise it with --max-debug-bytes)")
	}
}

// addFetchers gives the symbolizer a debuginfod client when DEBUGINFOD_URLS
// names servers and --no-debuginfod is not given: separate debug files by
// build id, and for report (a saved capture, perhaps from another machine)
// the module files themselves. Fetching happens only while symbolizing. The
// client is made once: sandboxed children (whose fetches run here) share it.
func (c *common) addFetchers(o *symtab.Options) {
	if !c.debuginfodSet && !c.noDebuginfod && os.Getenv("DEBUGINFOD_URLS") != "" {
		c.debuginfod = debuginfod.Setup(os.Getenv, c.maxDebugBytes, c.quiet, term.IsTerminal(2), os.Stderr, cli.Say)
	}
	if c.debuginfodSet = true; c.debuginfod != nil {
		o.FetchDebug = c.debuginfod.Debuginfo
	}
	if c.debuginfod != nil && c.fs.Name() == "report" {
		o.FetchExecutable = c.debuginfod.Executable
	}
}

// sandboxConfig is the child's configuration from the flags.
func (c *common) sandboxConfig(opts resolve.Options) sandbox.Config {
	cfg := sandbox.Config{Resolve: opts, Symtab: c.symtabOptions(), Cache: diskcache.Shared(c.noCache, c.quiet, cli.Say)}
	c.addFetchers(&cfg.Symtab) // (run here when the child asks: it has no network)
	if c.timeout > 0 {
		cfg.Deadline = c.started.Add(c.timeout)
	}
	return cfg
}
