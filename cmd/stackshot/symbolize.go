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

	"stackshot/internal/arch"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

func cmdSymbolize(args []string) error {
	c := newCommon("symbolize")
	var exe string
	var showAddr bool
	c.fs.StringVarP(&exe, "exe", "e", "", "resolve addresses in this ELF file (addresses are its virtual addresses)")
	c.fs.BoolVarP(&showAddr, "addresses", "a", false, "print each address before its lines")
	if err := c.fs.Parse(args); err != nil {
		if err.Error() == "pflag: help requested" {
			return err
		}
		return usageError{err.Error()}
	}
	if exe != "" {
		// A relative path, as addr2line takes it.
		if abs, err := filepath.Abs(exe); err == nil {
			exe = abs
		}
	}
	if exe == "" && len(c.pids) == 0 {
		return usageError{"symbolize needs -e FILE or -p PID"}
	}
	if exe != "" && len(c.pids) > 0 {
		return usageError{"symbolize takes -e FILE or -p PID, not both"}
	}
	if len(c.pids) > 1 {
		return usageError{"symbolize takes one -p PID"}
	}
	var addrs []string
	addrs = append(addrs, c.fs.Args()...)
	fromStdin := len(addrs) == 0
	sym := symtab.New(symtab.Options{DebugDirs: c.debugDirs, NoDemangle: c.noDemangle})
	var lookup func(addr uint64) []report.Frame
	if exe != "" {
		mod, err := sym.Module(symtab.ModuleRef{Path: exe})
		if err != nil {
			return fmt.Errorf("cannot read %s (%v)", exe, err)
		}
		var syms []symtab.Sym
		lookup = func(addr uint64) []report.Frame {
			syms = mod.Lookup(addr, syms[:0])
			var out []report.Frame
			for _, s := range syms {
				out = append(out, report.Frame{Function: s.Function, File: s.File, Line: s.Line, Inlined: s.Inlined})
			}
			return out
		}
	} else {
		pid := c.pids[0]
		maps, err := procmaps.ReadMaps(pid)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cannot read process %d (no such process; check the pid with ps)", pid)
			}
			return fmt.Errorf("cannot read process %d (%v; %s)", pid, err, permissionHelp(pid))
		}
		p := &ptrace.Process{Arch: arch.AMD64, PID: pid, Maps: maps}
		mem := ptrace.MemReader{PID: pid}
		resolve.CollectImages(p, mem)
		res := resolve.NewResolver(sym, resolve.Options{Live: true})
		space := res.Space(p, mem)
		lookup = func(addr uint64) []report.Frame { return res.Symbolize(space, addr, true) }
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	one := func(word string) {
		word = strings.TrimSpace(word)
		if word == "" {
			return
		}
		addr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(word, "0x"), "0X"), 16, 64)
		if showAddr {
			fmt.Fprintf(w, "0x%016x\n", addr)
		}
		if err != nil {
			fmt.Fprintf(w, "??\n??:0\n")
			return
		}
		frames := lookup(addr)
		if len(frames) == 0 {
			fmt.Fprintf(w, "??\n??:0\n")
			return
		}
		for _, f := range frames {
			name := f.Function
			if name == "" {
				name = "??"
			}
			file := f.File
			if file == "" {
				file = "??"
			}
			fmt.Fprintf(w, "%s\n%s:%d\n", name, file, f.Line)
		}
	}
	if fromStdin {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			for _, word := range strings.Fields(sc.Text()) {
				one(word)
			}
			w.Flush() // answer each line as it comes, as addr2line does
		}
		return nil
	}
	for _, a := range addrs {
		one(a)
	}
	return nil
}
