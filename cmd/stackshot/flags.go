//go:build linux

package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"stackshot/ptrace"
)

// common holds the flags shared by dump, capture, report and record.
type common struct {
	fs         *pflag.FlagSet
	pids       []int
	format     string
	jsonOut    bool
	output     string
	tids       []int
	kernel     bool
	noKernel   bool
	source     bool
	inline     bool
	maxFrames  int
	debugDirs  []string
	mode       string
	consistent bool
	timeout    time.Duration
	stackBytes int
	noDemangle bool
	verbose    bool
	quiet      bool
	files      bool // positional arguments are files (report), not pids
	// record
	freq      int
	duration  time.Duration
	perThread bool
	// dump: goroutines of Go processes (goroutines.go)
	goroutines, noGoroutines bool
}

func newCommon(name string) *common {
	c := &common{fs: pflag.NewFlagSet(name, pflag.ContinueOnError)}
	fs := c.fs
	fs.SortFlags = false
	fs.IntSliceVarP(&c.pids, "pid", "p", nil, "target process (repeatable)")
	fs.StringVar(&c.format, "format", "", "output format: text, json (record: folded, pprof, svg, json, text)")
	fs.BoolVar(&c.jsonOut, "json", false, "short for --format json")
	fs.StringVarP(&c.output, "output", "o", "", "write to FILE instead of stdout")
	fs.IntSliceVarP(&c.tids, "tid", "t", nil, "only these threads (repeatable)")
	fs.BoolVar(&c.kernel, "kernel", true, "add each thread's kernel frames")
	fs.BoolVar(&c.noKernel, "no-kernel", false, "no kernel frames")
	fs.BoolVarP(&c.source, "source", "s", false, "show file:line where debug info has it")
	fs.BoolVarP(&c.inline, "inline", "i", false, "expand inlined functions into their own frames")
	fs.IntVar(&c.maxFrames, "max-frames", 1024, "stop unwinding a thread after N frames")
	fs.StringArrayVar(&c.debugDirs, "debug-dir", nil, "extra root for separate debug files (repeatable)")
	fs.StringVar(&c.mode, "mode", "auto", "capture: auto, stop or nostop")
	fs.BoolVar(&c.consistent, "consistent", false, "stop all threads first, resume together")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "bound on the whole command")
	fs.IntVar(&c.stackBytes, "stack-bytes", 0, "most stack bytes copied per thread (default: the thread's stack, capped at 4 MiB)")
	fs.BoolVar(&c.noDemangle, "no-demangle", false, "keep raw symbol names")
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "unwind methods, pauses, reasons stacks ended")
	fs.BoolVarP(&c.quiet, "quiet", "q", false, "no progress or warnings on stderr")
	if name == "record" {
		fs.IntVarP(&c.freq, "freq", "F", 99, "samples per second")
		fs.DurationVarP(&c.duration, "duration", "d", 10*time.Second, "how long to record")
		fs.BoolVar(&c.perThread, "per-thread", false, "thread name as the root frame")
	}
	if name == "dump" {
		goroutineFlags(c)
	}
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: stackshot %s [flags] PID...\n\nflags:\n%s", name, fs.FlagUsages())
	}
	return c
}

// parse parses args and collects PIDs from flags and positional arguments.
func (c *common) parse(args []string, needPID bool) error {
	if err := c.fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return err
		}
		return usageError{err.Error()}
	}
	for _, a := range c.fs.Args() {
		if c.files {
			break
		}
		pid, err := strconv.Atoi(a)
		if err != nil || pid <= 0 {
			return usageError{fmt.Sprintf("%q is not a process id", a)}
		}
		c.pids = append(c.pids, pid)
	}
	seen := map[int]bool{}
	uniq := c.pids[:0]
	for _, p := range c.pids {
		if p <= 0 {
			return usageError{fmt.Sprintf("%d is not a process id", p)}
		}
		if !seen[p] { // the same pid twice is one target
			seen[p] = true
			uniq = append(uniq, p)
		}
	}
	c.pids = uniq
	if needPID && len(c.pids) == 0 {
		return usageError{"no process id given"}
	}
	if c.jsonOut {
		if c.format != "" && c.format != "json" {
			return usageError{"--json and --format " + c.format + " disagree"}
		}
		c.format = "json"
	}
	if c.noKernel {
		c.kernel = false
	}
	if c.maxFrames <= 0 {
		return usageError{"--max-frames must be positive"}
	}
	if c.timeout <= 0 {
		return usageError{"--timeout must be positive"}
	}
	if c.stackBytes < 0 {
		return usageError{"--stack-bytes must not be negative"}
	}
	if _, err := c.captureMode(); err != nil {
		return err
	}
	return nil
}

// namesOnly reports whether the output needs function names only: plain
// text without -s or -i (dump and report). Then debug info is not loaded,
// which for a large debug file is most of a dump's time.
func (c *common) namesOnly() bool {
	return c.fs.Name() != "record" && (c.format == "" || c.format == "text") && !c.source && !c.inline
}

func (c *common) captureMode() (ptrace.Mode, error) {
	switch strings.ToLower(c.mode) {
	case "auto", "":
		return ptrace.ModeAuto, nil
	case "stop":
		return ptrace.ModeStop, nil
	case "nostop":
		return ptrace.ModeNoStop, nil
	}
	return 0, usageError{fmt.Sprintf("--mode %q: want auto, stop or nostop", c.mode)}
}

func goVersion() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }
