//go:build linux

package main

import (
	"bytes"
	"os"
	"strings"
	"time"

	"stackshot/capfile"
	"stackshot/internal/cli"
	"stackshot/internal/safefile"
	"stackshot/offline"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
)

func cmdCapture(args []string) error {
	c := newCommon("capture")
	if err := c.parse(args, true); err != nil {
		return err
	}
	if c.output == "" {
		return cli.Usage("capture needs -o FILE", "a capture is written to a file", "e.g. 'stackshot capture -o snap.gz PID'")
	}
	core := c.format == "core" || c.format == "" && strings.HasSuffix(c.output, ".core")
	what, err := capfile.ParseCoreMemory(c.coreMemory)
	if err != nil {
		return cli.Usage("--core-memory "+c.coreMemory, err.Error(), "give stacks, writable or all")
	}
	if core && len(c.pids) > 1 && !strings.Contains(c.output, "%p") {
		return cli.UsageError{Msg: "cannot write several processes to one core (a core holds one process; give one pid, or put %p in the -o name)"}
	}
	s := c.newSession(false)
	s.CatchSignals()
	defer s.Close()
	deadline := time.Now().Add(c.timeout)
	start := time.Now()
	host, _ := os.Hostname()
	cf := capfile.File{Host: host, Kernel: c.kernel}
	failed, err := s.Save(c.pids, deadline, func(p *ptrace.Process) error {
		if !core {
			cf.Processes = append(cf.Processes, p)
			return nil
		}
		data, err := s.Core(p, what)
		if err != nil {
			return err
		}
		return safefile.Output(safefile.Expand(c.output, []int{p.PID}, start), data, safefile.Private)
	})
	if err != nil {
		return err
	}
	if len(cf.Processes) > 0 {
		var buf bytes.Buffer
		if err := capfile.Encode(&buf, &cf); err != nil {
			return err
		}
		// Stack bytes may hold secrets: owner-only, like a core.
		if err := safefile.Output(safefile.Expand(c.output, c.pids, start), buf.Bytes(), safefile.Private); err != nil {
			return err
		}
	}
	return cli.Failed(failed)
}

func cmdReport(args []string) error {
	c := newCommon("report")
	c.files = true
	if err := c.parse(args, false); err != nil {
		return err
	}
	files := c.fs.Args()
	if len(files) == 0 {
		return cli.Usage("report needs a capture FILE", "it reads what 'stackshot capture' or a core dump saved", "e.g. 'stackshot report snap.gz'")
	}
	sym := c.newSymbolizer() // (sets c.debuginfod)
	r := offline.New(sym, offline.Options{Resolve: resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel, Sysroot: c.sysroot, NoJava: c.noJava, Exe: c.exe},
		Sandbox: c.sandboxConfig(resolve.Options{}), NoSandbox: c.noSandbox,
		TIDs: c.tids, Quiet: c.quiet, Say: cli.Say})
	var procs []*report.Process
	failed := 0
	for _, path := range files {
		ps, f, err := r.Read(path)
		if err != nil {
			return err
		}
		procs, failed = append(procs, ps...), failed+f
	}
	if err := c.writeReport(procs); err != nil {
		return err
	}
	c.symbolizerNotes(r)
	return cli.Failed(failed)
}
