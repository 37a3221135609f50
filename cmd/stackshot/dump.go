//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"stackshot/internal/cli"
	"stackshot/internal/safefile"
	"stackshot/live"
	"stackshot/output"
	"stackshot/report"
)

// diagFlags are dump's diagnosis flags.
type diagFlags struct {
	group    bool
	noGroup  bool
	interval time.Duration
	count    int
}

func (c *common) addDiagFlags() {
	fs := c.fs
	fs.BoolVar(&c.diag.group, "group", false, fmt.Sprintf("fold threads with the same stack into one entry (on past %d threads)", live.GroupAuto))
	fs.BoolVar(&c.diag.noGroup, "no-group", false, "never fold threads")
	fs.DurationVar(&c.diag.interval, "interval", time.Second, "with --count: time between snapshots")
	fs.IntVar(&c.diag.count, "count", 1, "take N snapshots --interval apart; say which threads are stuck, spinning or moving")
	fs.BoolVar(&c.goroutines, "goroutines", true, "list the goroutines of Go processes")
	fs.BoolVar(&c.noGoroutines, "no-goroutines", false, "no goroutines")
}

func (c *common) checkDiagFlags() error {
	if c.diag.group && c.diag.noGroup {
		return cli.UsageError{Msg: "--group and --no-group disagree"}
	}
	if c.diag.count < 1 || c.diag.count > 1000 {
		return cli.UsageError{Msg: "--count must be between 1 and 1000"}
	}
	if c.diag.count > 1 && c.diag.interval <= 0 {
		return cli.UsageError{Msg: "--interval must be positive"}
	}
	return nil
}

func cmdDump(args []string) error {
	c := newCommon("dump")
	if err := c.parse(args, true); err != nil {
		return err
	}
	if err := checkWritable(c.output); err != nil {
		return err
	}
	if err := c.checkDiagFlags(); err != nil {
		return err
	}
	s := c.newSession(false)
	stop := s.CatchSignals()
	defer stop()
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
	if failed > 0 {
		return cli.ExitError{Code: cli.ExitTarget}
	}
	return nil
}

// writeReport renders dump-style reports (text or JSON) and writes them
// whole.
func (c *common) writeReport(procs []*report.Process) error {
	data, err := output.Render(procs, c.format == "json", len(c.pids) > 1 || len(procs) > 1,
		output.TextOptions{Source: c.source, Inline: c.inline, Verbose: c.verbose})
	if err != nil {
		return err
	}
	return safefile.Output(c.output, data, safefile.Public)
}

// checkWritable makes sure path could be written (the checks of
// safefile.Create, and a temporary file created beside it and removed)
// before a long recording starts.
func checkWritable(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return cli.Usage("cannot write to "+path, "it is a directory", "give a file name, e.g. -o "+filepath.Join(path, "stacks.txt"))
	}
	return safefile.Check(path)
}
