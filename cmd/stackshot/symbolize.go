//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"stackshot/internal/cli"
	"stackshot/live"
	"stackshot/output"
	"stackshot/report"
	"stackshot/resolve"
)

// symbolizeOpts are the flags only symbolize takes.
type symbolizeOpts struct {
	exe               string
	showAddr, jsonOut bool
}

func symbolizeFlags(c *common) *symbolizeOpts {
	o := &symbolizeOpts{}
	c.fs.StringVarP(&o.exe, "exe", "e", "", "resolve addresses in this ELF file (addresses are its virtual addresses)")
	c.fs.BoolVarP(&o.showAddr, "addresses", "a", false, "print each address before its lines")
	c.fs.BoolVar(&o.jsonOut, "json", false, "write a JSON array of {address, frames: [{function, file, line, inlined}]}")
	return o
}

func cmdSymbolize(args []string) error {
	c := newCommon("symbolize")
	o := symbolizeFlags(c)
	c.files = true // positional arguments are addresses
	if err := c.parse(args, false); err != nil {
		return err
	}
	switch {
	case o.exe == "" && len(c.pids) == 0:
		return cli.Usage("symbolize needs -e FILE or -p PID", "addresses mean nothing without a file or a process", "")
	case o.exe != "" && len(c.pids) > 0:
		return cli.Usage("symbolize takes -e FILE or -p PID, not both", "addresses are in one of them", "")
	case len(c.pids) > 1:
		return cli.Usage("symbolize takes one -p PID", "addresses are in one process", "")
	}
	lookup, done, err := c.addressLookup(o.exe)
	if err != nil {
		return err
	}
	if done != nil {
		defer done()
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	var all []output.Address
	one := func(word string) {
		a := output.Address{Text: word}
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(word, "0x"), "0X"), 16, 64)
		if a.Addr, a.OK = v, err == nil; a.OK {
			a.Frames = lookup(v)
		}
		if o.jsonOut {
			all = append(all, a) // one array, written at the end
		} else {
			output.Addr2line(w, a, o.showAddr)
		}
	}
	for _, a := range c.fs.Args() {
		one(strings.TrimSpace(a))
	}
	if len(c.fs.Args()) == 0 {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			for _, word := range strings.Fields(sc.Text()) {
				one(word)
			}
			w.Flush() // answer each line as it comes, as addr2line does
		}
	}
	if o.jsonOut {
		return output.AddressesJSON(w, all)
	}
	return nil
}

// addressLookup names addresses in the ELF file exe, or in the live
// process's address space (live.Lookup).
func (c *common) addressLookup(exe string) (func(uint64) []report.Frame, func(), error) {
	if exe == "" {
		return live.Lookup(c.pids[0], c.newSymbolizer, live.Options{Sandbox: c.sandboxConfig(resolve.Options{}),
			NoSandbox: c.noSandbox, Quiet: c.quiet, Say: c.say})
	}
	if abs, err := filepath.Abs(exe); err == nil {
		exe = abs // a relative path, as addr2line takes it
	}
	lookup, err := resolve.FileSymbolizer(c.newSymbolizer(), exe)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil, fmt.Errorf("cannot read %s (no such file; check the path)", exe)
	case errors.Is(err, resolve.ErrNotELF):
		return nil, nil, fmt.Errorf("cannot read %s (not an ELF file; give an executable or a shared library)", exe)
	case err != nil:
		return nil, nil, fmt.Errorf("cannot read %s (%v; check it is a readable executable or shared library)", exe, err)
	}
	return lookup, nil, nil
}
