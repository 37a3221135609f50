//go:build linux

package main

import (
	"bytes"
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
	f, size, err := capfile.OpenFile(path)
	if err != nil {
		return nil, err
	}
	saved, err := capfile.Load(f, size)
	if err != nil {
		f.Close()
		return nil, loadError(path, err)
	}
	return saved, nil
}

func loadError(path string, err error) error {
	if errors.Is(err, capfile.ErrNotCapture) {
		return fmt.Errorf("cannot read %s (%v; make one with 'stackshot capture PID -o FILE')", path, err)
	}
	return fmt.Errorf("cannot read %s (%v)", path, err)
}

// reportInChild reads a saved capture (capture file or core: the
// target's bytes, hostile) and resolves it in a sandboxed child, handed
// the opened file; nil when the sandbox is off (--no-sandbox) or no child
// starts.
func (c *common) reportInChild(path string) (*sandbox.SavedReport, error) {
	if c.noSandbox {
		return nil, nil
	}
	f, size, err := capfile.OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	child := c.startSandbox(resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel, Sysroot: c.sysroot}, sandbox.Target{UID: -1, GID: -1}, path)
	if child == nil {
		return nil, nil
	}
	defer child.Close()
	defer c.noteSandbox(child)
	r, err := child.Saved(f, size, c.tids)
	if err != nil {
		return nil, loadError(path, err)
	}
	for _, l := range r.Lines {
		printErr("stackshot: %s", l)
	}
	return r, nil
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
		if r, err := c.reportInChild(path); err != nil {
			return err
		} else if r != nil {
			procs, failed = append(procs, r.Procs...), failed+r.Failed
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
