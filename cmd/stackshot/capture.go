//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"stackshot/capfile"
	"stackshot/internal/arch"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

func cmdCapture(args []string) error {
	c := newCommon("capture")
	var coreMem string
	c.fs.StringVar(&coreMem, "core-memory", "stacks", "with --format core: the memory the core carries: stacks, writable or all")
	if err := c.parse(args, true); err != nil {
		return err
	}
	if c.output == "" {
		return usageError{"capture needs -o FILE"}
	}
	core := c.format == "core" || c.format == "" && strings.HasSuffix(c.output, ".core")
	if c.format != "" && c.format != "core" {
		return usageError{fmt.Sprintf("capture writes a capture file or --format core, not %q", c.format)}
	}
	what, err := capfile.ParseCoreMemory(coreMem)
	if err != nil {
		return usageError{err.Error()}
	}
	if core && len(c.pids) > 1 && !strings.Contains(c.output, "%p") {
		return usageError{"cannot write several processes to one core (a core holds one process; give one pid, or put %p in the -o name)"}
	}
	s := newSession(c)
	stop := s.catchSignals()
	defer stop()
	deadline := time.Now().Add(c.timeout)
	start := time.Now()
	host, _ := os.Hostname()
	cf := capfile.File{Host: host, Kernel: c.kernel}
	failed := 0
	for _, pid := range c.pids {
		p, err := s.capture(pid, deadline)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stackshot: %v\n", err)
			failed++
			continue
		}
		// Read after every thread runs again: an ELF core's NT_AUXV,
		// and the kernel frames' addresses, which only this host knows.
		p.Auxv, _ = procmaps.ReadAuxv(p.MemPID())
		if c.kernel {
			s.res.KernelAddrs(p)
		}
		if !core {
			cf.Processes = append(cf.Processes, p)
			continue
		}
		if err := s.writeCore(p, what, expandOutput(c.output, []int{pid}, start)); err != nil {
			return err
		}
	}
	if s.interrupted() {
		fmt.Fprintln(os.Stderr, "stackshot: interrupted (every thread was detached; nothing written)")
		return exitError{exitTarget}
	}
	if len(cf.Processes) > 0 {
		var buf bytes.Buffer
		if err := capfile.Encode(&buf, &cf); err != nil {
			return err
		}
		// Stack bytes may hold secrets: owner-only, like a core.
		if err := writeOutputPerm(expandOutput(c.output, c.pids, start), buf.Bytes(), 0o600); err != nil {
			return err
		}
	}
	if failed > 0 {
		return exitError{exitTarget}
	}
	return nil
}

// writeCore writes one process's capture as an ELF core, with the memory
// read after its threads run again (no stop).
func (s *session) writeCore(p *ptrace.Process, what capfile.CoreMemory, path string) error {
	extra, note := capfile.CollectMemory(p, ptrace.MemReader{PID: p.MemPID()}, what)
	if note != "" {
		s.warn("%s", note)
	}
	host, _ := os.Hostname()
	var buf bytes.Buffer
	if err := capfile.WriteCore(&buf, p, capfile.CoreOptions{Host: host, Kernel: s.c.kernel, Extra: extra}); err != nil {
		return fmt.Errorf("cannot write core of process %d (%v)", p.PID, err)
	}
	return writeOutputPerm(path, buf.Bytes(), 0o600)
}

// loadSaved opens a capture file or an ELF core. The file stays open
// (a core's memory is read from it on demand) until the command exits.
func loadSaved(path string) ([]capfile.Saved, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s (%v)", path, errors.Unwrap(err))
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("cannot read %s (not a regular file; give a capture file or a core)", path)
	}
	saved, err := capfile.Load(f, st.Size())
	if err != nil {
		f.Close()
		if errors.Is(err, capfile.ErrNotCapture) {
			return nil, fmt.Errorf("cannot read %s (%v; make one with 'stackshot capture PID -o FILE')", path, err)
		}
		return nil, fmt.Errorf("cannot read %s (%v)", path, err)
	}
	return saved, nil
}

func cmdReport(args []string) error {
	c := newCommon("report")
	c.files = true
	var sysroot string
	c.fs.StringVar(&sysroot, "sysroot", "/", "look the capture's files up under DIR first (checked by build id)")
	if err := c.parse(args, false); err != nil {
		return err
	}
	files := c.fs.Args()
	if len(files) == 0 {
		return usageError{"report needs a capture FILE"}
	}
	switch c.format {
	case "", "text", "json":
	default:
		return usageError{fmt.Sprintf("report writes text or json, not %q", c.format)}
	}
	sym := symtab.New(symtab.Options{DebugDirs: c.debugDirs, NoDemangle: c.noDemangle, NamesOnly: c.namesOnly()})
	var procs []*report.Process
	for _, path := range files {
		saved, err := loadSaved(path)
		if err != nil {
			return err
		}
		for _, sv := range saved {
			res := resolve.NewResolver(sym, resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel && sv.Kernel, Sysroot: sysroot})
			p := sv.Process
			if sv.Mem != nil && p.BuildIDs == nil {
				resolve.CollectImages(p, sv.Mem) // a core of another tool
			}
			rp := res.Process(p, sv.Mem)
			rp.Warnings = append(rp.Warnings, sv.Warnings...)
			procs = append(procs, rp)
		}
	}
	return c.writeReport(procs)
}

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
