//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"stackshot/internal/cli"
	"stackshot/internal/safefile"
	"stackshot/internal/term"
	"stackshot/live"
	"stackshot/output"
	"stackshot/ptrace"
	"stackshot/sampler"
)

func cmdRecord(args []string) error {
	start := time.Now()
	c := newCommon("record")
	if err := c.parse(args, true); err != nil {
		return err
	}
	if err := c.otlp.prepare(c.quiet); err != nil {
		return err
	}
	format, err := output.FormatFor(c.output, c.format)
	if err != nil {
		return cli.Usage(err.Error(), "", "")
	}
	path := safefile.Expand(c.output, c.pids, start)
	if err := cli.CheckProfileOutput(format, path); err != nil {
		return err // (now, not after the whole recording)
	}
	// --timeout bounds the whole command, sampling included.
	deadline := start.Add(c.timeout)
	if c.timeout == 0 {
		deadline = start.Add(c.duration + 10*time.Second)
	}
	s := c.newSession(true)
	s.CatchSignals()
	defer s.Close()
	clear, show := sampler.TerminalProgress(!c.quiet && term.IsTerminal(2), os.Stderr)
	smp, err := sampler.New(s.Resolver(), sampler.Config{Freq: c.freq, Duration: c.duration, Deadline: deadline,
		Capture: s.CaptureOptions(time.Time{}), CaptureTimeout: c.timeout, Kernel: c.kernel, Idle: c.idle, Source: c.sampler,
		Warn:     func(msg string) { s.Warn("%s%s", clear, msg) },
		Progress: show, Sandbox: s.Sandbox, NoPython: c.noPython})
	if err != nil {
		return cli.Usage(err.Error(), "", "")
	}
	defer smp.Close()
	if smp.Perf() { // (then the mode was auto or nostop)
		s.UseMode(ptrace.ModeNoStop) // the first capture stops no thread either
	}
	if err := s.CaptureOnce(c.pids, deadline, smp.Add); err != nil {
		return err // (explained; interrupted: nothing to write)
	}
	end := smp.Run()
	fmt.Fprint(os.Stderr, clear)
	prof := smp.Profile()
	if end == sampler.EndInterrupted && prof.Stats.Ticks == 0 {
		return live.ErrInterrupted // (not one sample: nothing to write)
	}
	prof.PerThread = c.perThread
	var went []string                        // where the profile went, for the summary
	if !c.otlp.enabled() || c.output != "" { // --otlp alone writes no stdout
		var buf bytes.Buffer
		if err := output.WriteProfile(&buf, prof, format, 20); err != nil {
			return err
		}
		if err := safefile.Output(path, buf.Bytes(), safefile.Public); err != nil {
			return err
		}
		went = append(went, "written to "+safefile.OutputName(path))
	}
	sent, sendErr := c.otlp.deliver(prof, max(time.Until(deadline), time.Second), c.quiet)
	if sent != "" {
		went = append(went, sent)
	}
	output.WriteSummary(os.Stderr, prof, output.Summary{End: end.String(), Went: strings.Join(went, ", "), Verbose: c.verbose, Quiet: c.quiet})
	c.symbolizerNotes(s)
	return sendErr
}
