//go:build linux

package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"stackshot/capfile"
	"stackshot/internal/safefile"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
)

func cmdCapture(args []string) error {
	c := newCommon("capture")
	if err := c.parse(args, true); err != nil {
		return err
	}
	if c.output == "" {
		return usageErr("capture needs -o FILE", "a capture is written to a file", "e.g. 'stackshot capture -o snap.gz PID'")
	}
	core := c.format == "core" || c.format == "" && strings.HasSuffix(c.output, ".core")
	what, err := capfile.ParseCoreMemory(c.coreMemory)
	if err != nil {
		return usageErr("--core-memory "+c.coreMemory, err.Error(), "give stacks, writable or all")
	}
	if core && len(c.pids) > 1 && !strings.Contains(c.output, "%p") {
		return usageError{"cannot write several processes to one core (a core holds one process; give one pid, or put %p in the -o name)"}
	}
	s := newSession(c)
	stop := s.catchSignals()
	defer stop()
	defer s.closeSandboxes()
	deadline := time.Now().Add(c.timeout)
	start := time.Now()
	host, _ := os.Hostname()
	cf := capfile.File{Host: host, Kernel: c.kernel}
	failed := 0
	for _, pid := range c.pids {
		p, err := s.safeCapture(pid, deadline)
		if err != nil {
			printErr("stackshot: %v", err)
			failed++
			continue
		}
		if !c.keepThreads(p) {
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
		printErr("stackshot: interrupted (every thread was detached; nothing written)")
		return exitError{exitTarget}
	}
	if len(cf.Processes) > 0 {
		var buf bytes.Buffer
		if err := capfile.Encode(&buf, &cf); err != nil {
			return err
		}
		// Stack bytes may hold secrets: owner-only, like a core.
		if err := writeOutputMode(expandOutput(c.output, c.pids, start), buf.Bytes(), safefile.Private); err != nil {
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
	return writeOutputMode(path, buf.Bytes(), safefile.Private)
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
	if err := c.parse(args, false); err != nil {
		return err
	}
	files := c.fs.Args()
	if len(files) == 0 {
		return usageErr("report needs a capture FILE", "it reads what 'stackshot capture' or a core dump saved", "e.g. 'stackshot report snap.gz'")
	}
	sym := c.newSymbolizer()
	var procs []*report.Process
	failed := 0
	for _, path := range files {
		if rps, done, f, err := c.reportCore(path); done {
			if err != nil {
				return err
			}
			procs, failed = append(procs, rps...), failed+f
			continue
		}
		saved, err := loadSaved(path)
		if err != nil {
			return err
		}
		for _, sv := range saved {
			ropts := resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel && sv.Kernel, Sysroot: c.sysroot}
			res := resolve.NewResolver(sym, ropts)
			p := sv.Process
			if !c.keepThreads(p) {
				continue
			}
			// A capture file is hostile: parsed in a sandboxed child. (A
			// core is read there whole: reportCore. Fetching from
			// debuginfod, which the child cannot, stays in-process: see
			// the README.)
			if sv.Mem == nil && !c.noSandbox && !c.debuginfod.Enabled() {
				if child := c.startSandbox(ropts, sandbox.Target{UID: -1, GID: -1}, path); child != nil {
					rp, err := child.Resolve(p)
					if err != nil && !c.quiet {
						printErr("stackshot: %v", err)
					}
					c.noteSandbox(child)
					child.Close()
					rp.Warnings = append(rp.Warnings, sv.Warnings...)
					procs = append(procs, rp)
					continue
				}
			}
			if sv.Mem != nil && p.BuildIDs == nil {
				resolve.CollectImages(p, sv.Mem) // a core of another tool
			}
			rp, err := resolveProcess(res, p, sv.Mem)
			if err != nil {
				printErr("stackshot: %v", err)
				failed++
				continue
			}
			rp.Warnings = append(rp.Warnings, sv.Warnings...)
			procs = append(procs, rp)
		}
	}
	if err := c.writeReport(procs); err != nil {
		return err
	}
	c.symbolizerNotes(sym)
	if failed > 0 {
		return exitError{exitTarget}
	}
	return nil
}

// reportCore reads an ELF core and resolves its process in a sandboxed
// child, which is handed the opened file: a core is the crashed or
// captured process's bytes, hostile. done is false when it is not a
// readable ELF file, the sandbox is off (--no-sandbox, debuginfod) or no
// child starts: then the core is read in-process (loadSaved). A failed
// child costs the core (said on stderr, counted in failed), nothing else.
func (c *common) reportCore(path string) (procs []*report.Process, done bool, failed int, err error) {
	if c.noSandbox || c.debuginfod.Enabled() {
		return nil, false, 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, 0, nil // (loadSaved says why)
	}
	defer f.Close()
	var magic [4]byte
	st, err := f.Stat()
	if n, _ := f.ReadAt(magic[:], 0); err != nil || !st.Mode().IsRegular() || n != 4 || string(magic[:]) != elf.ELFMAG {
		return nil, false, 0, nil
	}
	child := c.startSandbox(resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel, Sysroot: c.sysroot}, sandbox.Target{UID: -1, GID: -1}, path)
	if child == nil {
		return nil, false, 0, nil
	}
	defer child.Close()
	res, err := child.Core(f, st.Size(), c.tids)
	c.noteSandbox(child)
	var le *sandbox.LoadError
	if errors.As(err, &le) {
		return nil, true, 0, fmt.Errorf("cannot read %s (%s)", path, le.Why)
	}
	if err != nil {
		printErr("stackshot: core %s not shown: %v", path, err)
		return nil, true, 1, nil
	}
	for _, r := range res {
		if len(r.Missing) > 0 {
			fmt.Fprintf(os.Stderr, "stackshot: no thread %s in process %d (the capture has no such thread; check the ids, e.g. with 'ls /proc/%d/task')\n",
				joinInts(r.Missing), r.PID, r.PID)
		}
		switch {
		case r.Err != "":
			printErr("stackshot: %s", r.Err)
			failed++
		case r.Process != nil:
			procs = append(procs, r.Process)
		}
	}
	return procs, true, failed, nil
}
