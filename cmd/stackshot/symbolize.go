//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// symbolizeOpts are the flags only symbolize takes.
type symbolizeOpts struct {
	exe      string
	showAddr bool
	jsonOut  bool
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
		return usageErr("symbolize needs -e FILE or -p PID", "addresses mean nothing without a file or a process", "")
	case o.exe != "" && len(c.pids) > 0:
		return usageErr("symbolize takes -e FILE or -p PID, not both", "addresses are in one of them", "")
	case len(c.pids) > 1:
		return usageErr("symbolize takes one -p PID", "addresses are in one process", "")
	}
	sym := symtab.New(symtab.Options{DebugDirs: c.debugDirs, NoDemangle: c.noDemangle})
	lookup, err := addressLookup(sym, o.exe, c.pids)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	var all []symbolized
	one := func(word string) {
		addr, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(word, "0x"), "0X"), 16, 64)
		var frames []report.Frame
		if err == nil {
			frames = lookup(addr)
		}
		if o.jsonOut {
			all = append(all, toSymbolized(word, addr, err == nil, frames))
			return
		}
		writeAddr2line(w, addr, o.showAddr, frames)
	}
	if len(c.fs.Args()) > 0 {
		for _, a := range c.fs.Args() {
			one(strings.TrimSpace(a))
		}
	} else {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			for _, word := range strings.Fields(sc.Text()) {
				one(word)
			}
			w.Flush() // answer each line as it comes, as addr2line does
		}
	}
	if o.jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(append([]symbolized{}, all...))
	}
	return nil
}

// addressLookup returns what names an address: in the ELF file exe, or in
// the live process's address space.
func addressLookup(sym *symtab.Symbolizer, exe string, pids []int) (func(uint64) []report.Frame, error) {
	if exe != "" {
		if abs, err := filepath.Abs(exe); err == nil {
			exe = abs // a relative path, as addr2line takes it
		}
		if err := checkELF(exe); err != nil {
			return nil, err
		}
		mod, err := sym.Module(symtab.ModuleRef{Path: exe})
		if err != nil {
			return nil, fmt.Errorf("cannot read %s (%v; check it is an executable or a shared library)", exe, err)
		}
		var syms []symtab.Sym
		return func(addr uint64) []report.Frame {
			syms = mod.Lookup(addr, syms[:0])
			var out []report.Frame
			for _, s := range syms {
				out = append(out, report.Frame{Function: s.Function, File: s.File, Line: s.Line, Inlined: s.Inlined})
			}
			return out
		}, nil
	}
	pid := pids[0]
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		return nil, explainCaptureError(pid, err)
	}
	p := &ptrace.Process{Arch: arch.AMD64, PID: pid, Maps: maps}
	mem := ptrace.MemReader{PID: pid}
	resolve.CollectImages(p, mem)
	res := resolve.NewResolver(sym, resolve.Options{Live: true})
	space := res.Space(p, mem)
	return func(addr uint64) []report.Frame { return res.Symbolize(space, addr, true) }, nil
}

// checkELF says, in the contract's words, why path is not an ELF file.
func checkELF(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cannot read %s (no such file; check the path)", path)
		}
		return fmt.Errorf("cannot read %s (%v; check its permissions)", path, errors.Unwrap(err))
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || !bytes.Equal(magic, []byte("\x7fELF")) {
		return fmt.Errorf("cannot read %s (not an ELF file; give an executable or a shared library)", path)
	}
	return nil
}

func writeAddr2line(w io.Writer, addr uint64, showAddr bool, frames []report.Frame) {
	if showAddr {
		fmt.Fprintf(w, "0x%016x\n", addr)
	}
	if len(frames) == 0 {
		fmt.Fprintf(w, "??\n??:0\n")
	}
	for _, f := range frames {
		fmt.Fprintf(w, "%s\n%s:%d\n", orUnknown(f.Function), orUnknown(f.File), f.Line)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "??"
	}
	return s
}

// symbolized is one address in `symbolize --json`: its logical frames,
// innermost (inlined) first; none when unknown.
type symbolized struct {
	Address string           `json:"address"`
	Error   string           `json:"error,omitempty"`
	Frames  []symbolizedLine `json:"frames"`
}

type symbolizedLine struct {
	Function *string `json:"function"`
	File     *string `json:"file"`
	Line     int     `json:"line"`
	Inlined  bool    `json:"inlined"`
}

func toSymbolized(word string, addr uint64, ok bool, frames []report.Frame) symbolized {
	if !ok {
		return symbolized{Address: word, Error: "not a hexadecimal address", Frames: []symbolizedLine{}}
	}
	s := symbolized{Address: fmt.Sprintf("%#x", addr), Frames: []symbolizedLine{}}
	for _, f := range frames {
		l := symbolizedLine{Line: f.Line, Inlined: f.Inlined}
		if f.Function != "" {
			l.Function = &f.Function
		}
		if f.File != "" {
			l.File = &f.File
		}
		s.Frames = append(s.Frames, l)
	}
	return s
}
