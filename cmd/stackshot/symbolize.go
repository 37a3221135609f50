//go:build linux

package main

import (
	"bufio"
	"os"

	"stackshot/internal/cli"
	"stackshot/live"
	"stackshot/output"
	"stackshot/report"
	"stackshot/resolve"
)

func cmdSymbolize(args []string) error {
	c := newCommon("symbolize")
	c.files = true // positional arguments are addresses
	if err := c.parse(args, false); err != nil {
		return err
	}
	switch {
	case c.exe == "" && len(c.pids) == 0:
		return cli.Usage("symbolize needs -e FILE or -p PID", "addresses mean nothing without a file or a process", "")
	case c.exe != "" && len(c.pids) > 0:
		return cli.Usage("symbolize takes -e FILE or -p PID, not both", "addresses are in one of them", "")
	case len(c.pids) > 1:
		return cli.Usage("symbolize takes one -p PID", "addresses are in one process", "")
	}
	lookup, prefetch, done, err := c.addressLookup(c.exe)
	if err != nil {
		return err
	}
	if done != nil {
		defer done()
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	return output.Symbolize(w, c.fs.Args(), os.Stdin, lookup, prefetch, c.addrJSON, c.showAddr)
}

// addressLookup names addresses in the ELF file exe (with a prefetch of
// the addresses about to be asked), or in the live process's address
// space (live.Lookup).
func (c *common) addressLookup(exe string) (func(uint64) []report.Frame, func([]uint64), func(), error) {
	if exe == "" {
		lookup, done, err := live.Lookup(c.pids[0], c.newSymbolizer, live.Options{Sandbox: c.sandboxConfig(resolve.Options{}),
			NoSandbox: c.noSandbox, Quiet: c.quiet, Say: cli.Say})
		return lookup, nil, done, err
	}
	lookup, prefetch, err := resolve.FileSymbolizerAhead(c.newSymbolizer(), exe)
	return lookup, prefetch, nil, err
}
