//go:build linux

package main

import (
	"stackshot/internal/cli"
	"stackshot/internal/safefile"
	"stackshot/output"
	"stackshot/report"
)

func cmdDump(args []string) error {
	c := newCommon("dump")
	if err := c.parse(args, true); err != nil {
		return err
	}
	c.output = safefile.Expand(c.output, c.pids, c.started) // (%p %t %h, as record's -o)
	if err := cli.CheckOutput(c.output); err != nil {
		return err
	}
	s := c.newSession(false)
	s.CatchSignalsOnTrace()
	defer s.Close()
	procs, failed, err := s.Dump(c.pids)
	if err != nil {
		return err
	}
	if len(procs) > 0 {
		if err := c.writeReport(procs); err != nil {
			return err
		}
		c.symbolizerNotes(s)
	}
	return cli.Failed(failed)
}

// writeReport renders dump-style reports (text or JSON) and writes them
// whole.
func (c *common) writeReport(procs []*report.Process) error {
	data, err := output.Render(procs, c.format == "json", len(c.pids) > 1 || len(procs) > 1,
		output.TextOptions{Source: c.source, Inline: c.inline, Verbose: c.verbose, NoFold: c.noGroup})
	if err != nil {
		return err
	}
	if c.verbose && !c.quiet {
		output.CaptureStats(procs, cli.Say)
	}
	return safefile.Output(c.output, data, safefile.Public)
}
