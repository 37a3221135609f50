//go:build linux

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"stackshot/internal/arch"
	"stackshot/internal/safefile"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
)

// captureFile is the saved form of `stackshot capture`: gzipped JSON of the
// raw captures (registers, stack bytes, maps, build ids, vdso), enough to
// unwind and symbolize later or on another machine with the same files.
type captureFile struct {
	Format    string            `json:"format"` // "stackshot-capture"
	Version   int               `json:"version"`
	Host      string            `json:"host"`
	Kernel    bool              `json:"kernel_frames"`
	Processes []*ptrace.Process `json:"processes"`
}

const captureFormat = "stackshot-capture"

func cmdCapture(args []string) error {
	c := newCommon("capture")
	if err := c.parse(args, true); err != nil {
		return err
	}
	if c.output == "" {
		return usageError{"capture needs -o FILE"}
	}
	s := newSession(c)
	stop := s.catchSignals()
	defer stop()
	defer s.closeSandboxes()
	deadline := time.Now().Add(c.timeout)
	host, _ := os.Hostname()
	cf := captureFile{Format: captureFormat, Version: 1, Host: host, Kernel: c.kernel}
	failed := 0
	for _, pid := range c.pids {
		p, err := s.safeCapture(pid, deadline)
		if err != nil {
			printErr("stackshot: %v", err)
			failed++
			continue
		}
		cf.Processes = append(cf.Processes, p)
	}
	if s.interrupted() {
		fmt.Fprintln(os.Stderr, "stackshot: interrupted (every thread was detached; nothing written)")
		return exitError{exitTarget}
	}
	if len(cf.Processes) > 0 {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if err := json.NewEncoder(zw).Encode(&cf); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		if err := writeOutputMode(expandOutput(c.output, c.pids, time.Now()), buf.Bytes(), safefile.Private); err != nil {
			return err
		}
	}
	if failed > 0 {
		return exitError{exitTarget}
	}
	return nil
}

// maxCaptureFile bounds what report reads (decompressed).
const maxCaptureFile = 1 << 30

func readCaptureFile(path string) (*captureFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s (%v)", path, errors.Unwrap(err))
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s (not a stackshot capture: %v; make one with 'stackshot capture PID -o FILE')", path, err)
	}
	var cf captureFile
	dec := json.NewDecoder(io.LimitReader(zr, maxCaptureFile))
	if err := dec.Decode(&cf); err != nil {
		return nil, fmt.Errorf("cannot read %s (corrupt capture: %v)", path, err)
	}
	if cf.Format != captureFormat || cf.Version != 1 {
		return nil, fmt.Errorf("cannot read %s (format %q version %d; this stackshot reads %s version 1)", path, cf.Format, cf.Version, captureFormat)
	}
	for _, p := range cf.Processes {
		if p == nil || p.Arch != arch.AMD64 {
			return nil, fmt.Errorf("cannot read %s (a capture of another architecture)", path)
		}
	}
	return &cf, nil
}

func cmdReport(args []string) error {
	c := newCommon("report")
	c.files = true
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
	sym := c.newSymbolizer()
	var procs []*report.Process
	failed := 0
	for _, path := range files {
		cf, err := readCaptureFile(path)
		if err != nil {
			return err
		}
		ropts := resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel && cf.Kernel}
		res := resolve.NewResolver(sym, ropts)
		// A capture file is hostile: parsed in a sandboxed child.
		var child *sandbox.Child
		if !c.noSandbox {
			child = c.startSandbox(ropts, sandbox.Target{UID: -1, GID: -1}, path)
		}
		for _, p := range cf.Processes {
			if !c.keepThreads(p) {
				continue
			}
			if child != nil {
				rp, err := child.Resolve(p)
				if err != nil && !c.quiet {
					printErr("stackshot: %v", err)
				}
				procs = append(procs, rp)
				continue
			}
			rp, err := resolveProcess(res, p, ptrace.MemReader{}, false)
			if err != nil {
				printErr("stackshot: %v", err)
				failed++
				continue
			}
			procs = append(procs, rp)
		}
		if child != nil {
			c.noteSandbox(child)
			child.Close()
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
