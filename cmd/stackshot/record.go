//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

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
	if c.freq <= 0 || c.freq > sampler.MaxFreq {
		return usageErr(fmt.Sprintf("--freq %d", c.freq), fmt.Sprintf("want 1 to %d samples per second", sampler.MaxFreq), "")
	}
	if c.duration <= 0 {
		return usageErr("--duration "+c.duration.String(), "want a positive duration", "")
	}
	source, err := sampler.ParseSource(c.sampler)
	if err != nil {
		return usageErr(err.Error(), "", "")
	}
	format, err := output.FormatFor(c.output, c.format)
	if err != nil {
		return usageErr(err.Error(), "", "")
	}
	path := expandOutput(c.output, c.pids, start)
	if format == "pprof" && (path == "" || path == "-") && isTerminal(1) {
		return usageErr("not writing a pprof profile to a terminal", "it is binary",
			"give -o FILE.pb.gz or redirect stdout")
	}
	// Fail now, not after the whole recording, if -o cannot be written.
	if err := checkWritable(path); err != nil {
		return err
	}
	// --timeout bounds the whole command, sampling included.
	deadline := start.Add(c.timeout)
	if c.timeout == 0 {
		deadline = start.Add(c.duration + 10*time.Second)
	}
	s := newSamplingSession(c)
	stop := s.catchSignals()
	defer stop()
	progress := !c.quiet && isTerminal(2)
	smp, err := sampler.New(s.res, sampler.Config{Freq: c.freq, Duration: c.duration, Deadline: deadline,
		Capture: s.captureOptions(time.Time{}), CaptureTimeout: c.timeout, Kernel: c.kernel, Idle: c.idle, Source: source,
		Warn:     func(msg string) { s.warn("%s%s", clearLine(progress), msg) },
		Progress: showProgress(progress)})
	if err != nil {
		return usageErr(err.Error(), "", "")
	}
	defer smp.Close()
	if m, _ := c.captureMode(); smp.Perf() && m == ptrace.ModeAuto {
		c.mode = "nostop" // with perf events, the first capture stops no thread either
	}
	for _, pid := range c.pids {
		p, err := s.capture(pid, deadline)
		if err != nil {
			return err // the message explains; exit 1
		}
		s.res.PrefetchDebug(p) // (debuginfod) before the ticks, not during them
		if err := smp.Add(p); err != nil {
			return explainCaptureError(pid, err)
		}
	}
	end := smp.Run()
	if progress {
		fmt.Fprint(os.Stderr, clearLine(true))
	}
	prof := smp.Profile()
	prof.PerThread = c.perThread
	if !c.otlp.enabled() || c.output != "" { // --otlp alone writes no stdout
		var buf bytes.Buffer
		if err := output.WriteProfile(&buf, prof, format, 20); err != nil {
			return err
		}
		if err := writeOutput(path, buf.Bytes()); err != nil {
			return err
		}
	}
	if where := c.otlp.where(path); !c.quiet {
		if where == "" || where == "-" {
			where = "stdout"
		}
		output.WriteSummary(os.Stderr, prof, end.String(), where)
	}
	c.symbolizerNotes(s.sym)
	return c.otlp.deliver(prof, max(time.Until(deadline), time.Second), c.quiet, c.verbose)
}

func showProgress(on bool) func(sampler.Progress) {
	if !on {
		return nil
	}
	return func(p sampler.Progress) {
		fmt.Fprintf(os.Stderr, "\rrecording %s/%s: %d samples, %.1f Hz, %d threads   ",
			p.Elapsed.Round(100*time.Millisecond), p.Duration, p.Samples, float64(p.Ticks)/p.Elapsed.Seconds(), p.Threads)
	}
}

func clearLine(progress bool) string {
	if progress {
		return "\r\033[K"
	}
	return ""
}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
