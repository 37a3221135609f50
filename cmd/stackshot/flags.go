//go:build linux

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"stackshot/debuginfod"
	"stackshot/internal/cli"
	"stackshot/live"
	"stackshot/ptrace"
	"stackshot/sampler"
	"stackshot/unwind"
)

// common holds the flags of every command; each registers only the ones it
// takes (flagSets).
type common struct {
	fs                               *pflag.FlagSet
	pids, tids                       []int
	format, output, mode             string
	debugDirs                        []string
	jsonOut, kernel, noKernel        bool
	source, inline, noDemangle       bool
	consistent, verbose, quiet       bool
	maxFrames, stackBytes            int
	timeout                          time.Duration
	files                            bool  // positional arguments are not pids (report, symbolize)
	badID                            error // a -p or -t value that is not an id
	freq                             int   // record
	duration                         time.Duration
	perThread, idle                  bool
	maxDebugBytes                    int64
	sysroot                          string             // report: where the capture's files are looked up first
	coreMemory                       string             // capture: what memory a core carries
	perfMap                          string             // report: the JIT perf map of the captured process
	sampler                          sampler.Source     // record: how running threads are sampled
	started                          time.Time          // when the command began: --timeout counts from here
	cancelSym                        context.CancelFunc // ends the symbolizer's deadline
	group, noGroup, noPython, noJava bool               // dump: fold threads alike, or never; no Python or Java frames
	interval                         time.Duration      // dump: between snapshots
	count                            int                // dump: snapshots
	goroutines, noGoroutines         bool               // dump: goroutines of Go processes
	exe                              string             // symbolize: the ELF file addresses are in
	showAddr, addrJSON               bool               // symbolize: -a, --json
	otlp                             *otlpFlags         // record: sending to a collector (otlp.go)
	noDebuginfod                     bool               // --no-debuginfod
	noCache                          bool               // --no-cache
	debuginfod                       *debuginfod.Client // fetches debug files by build id, or nil (options.go)
	debuginfodSet                    bool               // debuginfod made (once: the children share it)
	noSandbox                        bool               // parse the target's bytes in-process (options.go)
}

// Groups of flags, by what they are for.
const (
	fPID     = 1 << iota // -p
	fFormat              // --format, --json
	fOutput              // -o
	fTID                 // -t
	fKernel              // --kernel, --no-kernel
	fShow                // -s, -i, -v
	fUnwind              // --max-frames, --debug-dir, --no-demangle, --no-debuginfod
	fCapture             // --mode, --consistent, --timeout, --stack-bytes
	fQuiet               // -q
	fRecord              // -F, -d, --per-thread, --idle
	fSandbox             // --no-sandbox
)

var flagSets = map[string]int{
	"dump":      fPID | fFormat | fOutput | fTID | fKernel | fShow | fUnwind | fCapture | fQuiet | fSandbox,
	"record":    fPID | fFormat | fOutput | fTID | fKernel | fUnwind | fCapture | fQuiet | fRecord | fSandbox,
	"capture":   fPID | fFormat | fOutput | fTID | fKernel | fCapture | fQuiet | fSandbox,
	"report":    fFormat | fOutput | fTID | fKernel | fShow | fUnwind | fQuiet | fSandbox,
	"symbolize": fPID | fUnwind | fSandbox,
}

// fOld are the flags every command took before each took only its own.
const fOld = fPID | fFormat | fOutput | fTID | fKernel | fShow | fUnwind | fCapture | fQuiet

func newCommon(name string) *common {
	c := &common{fs: cli.NewFlagSet(name), maxFrames: unwind.DefaultMaxFrames}
	c.register(name, flagSets[name], c)
	if name == "dump" {
		fs := c.fs
		fs.BoolVar(&c.group, "group", false, fmt.Sprintf("fold threads, and goroutines, with the same stack into one entry (on past %d threads or %d goroutines, unless --no-group)", live.GroupAuto, live.GroupAutoGoroutines))
		fs.BoolVar(&c.noGroup, "no-group", false, "show every thread on its own: fold neither idle threads alike nor groups")
		fs.DurationVar(&c.interval, "interval", time.Second, "with --count: time between snapshots")
		fs.IntVar(&c.count, "count", 1, "take N snapshots --interval apart; say which threads are stuck, spinning or moving")
		fs.BoolVar(&c.goroutines, "goroutines", true, "list the goroutines of Go processes")
		fs.BoolVar(&c.noGoroutines, "no-goroutines", false, "no goroutines")
	}
	if name == "record" {
		c.fs.BoolVarP(&c.verbose, "verbose", "v", false, "the summary says how threads were sampled and what was left out")
		c.otlp = addOTLPFlags(c.fs)
	}
	if name == "symbolize" {
		c.fs.StringVarP(&c.exe, "exe", "e", "", "resolve addresses in this ELF `FILE` (addresses are its virtual addresses)")
		c.fs.BoolVarP(&c.showAddr, "addresses", "a", false, "print each address before its lines")
		c.fs.BoolVar(&c.addrJSON, "json", false, "write a JSON array of {address, frames: [{function, file, line, inlined}]}")
	}
	// The old ones this command ignored stay accepted, hidden, with a
	// warning; their values go nowhere.
	cli.AddHidden(c.fs, func() { c.register(name, fOld&^flagSets[name], &common{}) })
	return c
}

// register adds the flags of the groups in set, bound to v's fields.
func (c *common) register(name string, set int, v *common) {
	fs := c.fs
	if set&fPID != 0 {
		fs.VarP(cli.IDList{IDs: &v.pids, What: "process", Bad: &c.badID}, "pid", "p", "target process (repeatable)")
	}
	if set&fFormat != 0 {
		formats := map[string]string{"record": "folded, pprof, svg, json or text (default: by -o extension, else folded)",
			"capture": "core for an ELF core (default: a capture file; a name ending .core is a core)"}
		if formats[name] == "" {
			formats[name] = "text or json"
		}
		fs.StringVar(&v.format, "format", "", "output format: "+formats[name])
		if name == "capture" {
			fs.StringVar(&v.coreMemory, "core-memory", "stacks", "the memory a core carries: stacks, writable or all")
		}
		if name != "symbolize" && name != "capture" { // symbolize's --json is its own
			fs.BoolVar(&v.jsonOut, "json", false, "short for --format json")
		}
	}
	if set&fOutput != 0 {
		fs.StringVarP(&v.output, "output", "o", "", "write to `FILE` instead of stdout")
	}
	if set&fTID != 0 {
		fs.VarP(cli.IDList{IDs: &v.tids, What: "thread", Bad: &c.badID}, "tid", "t", "only these threads (repeatable)")
	}
	if set&fKernel != 0 {
		fs.BoolVar(&v.kernel, "kernel", true, "add each thread's kernel frames")
		fs.BoolVar(&v.noKernel, "no-kernel", false, "no kernel frames")
	}
	if set&fShow != 0 {
		fs.BoolVarP(&v.source, "source", "s", false, "show file:line where debug info has it")
		fs.BoolVarP(&v.inline, "inline", "i", false, "expand inlined functions into their own frames")
		if fs.Lookup("verbose") == nil { // (record's own)
			fs.BoolVarP(&v.verbose, "verbose", "v", false, "unwind methods, pauses, reasons stacks ended")
		}
	}
	if set&fUnwind != 0 {
		if name != "symbolize" {
			fs.IntVar(&v.maxFrames, "max-frames", unwind.DefaultMaxFrames, "stop unwinding a thread after N frames")
			fs.BoolVar(&v.noJava, "no-java", false, "leave a JVM's Java frames out (its compiled code is then walked as code without unwind info)")
		}
		if name == "dump" || name == "record" {
			fs.BoolVar(&v.noPython, "no-python", false, "leave out the Python frames of CPython programs")
		}
		fs.StringArrayVar(&v.debugDirs, "debug-dir", nil, "extra root `DIR` for separate debug files (repeatable)")
		fs.Int64Var(&v.maxDebugBytes, "max-debug-bytes", 0, "most bytes of symbols and debug info read in all (default 512 MiB; a section gets half)")
		if name == "report" {
			fs.StringVar(&v.perfMap, "perf-map", "", "the JIT perf map `FILE` (perf-PID.map) of the captured process")
			fs.StringVar(&v.sysroot, "sysroot", "/", "look the capture's files up under `DIR` first (checked by build id)")
			fs.StringVarP(&v.exe, "exe", "e", "", "use this ELF `FILE` as the core's main executable, as gdb EXE CORE does")
		}
		fs.BoolVar(&v.noDemangle, "no-demangle", false, "keep raw symbol names")
		if v == c { // (new: not among the flags every command once took)
			fs.BoolVar(&v.noDebuginfod, "no-debuginfod", false, "never fetch debug files from the servers in DEBUGINFOD_URLS")
			fs.BoolVar(&v.noCache, "no-cache", false, "neither read nor fill the cache of symbol and debug tables (see STACKSHOT_CACHE_DIR)")
		}
	}
	if set&fCapture != 0 {
		fs.StringVar(&v.mode, "mode", "auto", "capture: auto, stop or nostop")
		fs.BoolVar(&v.consistent, "consistent", false, "stop all threads first, resume together")
		if name == "record" {
			fs.DurationVar(&v.timeout, "timeout", 0, "bound on the whole command, recording included; threads that will not stop are reported from /proc (default: the duration and 10s more)")
		} else {
			fs.DurationVar(&v.timeout, "timeout", 10*time.Second, "bound on the whole command; threads that will not stop are reported from /proc")
		}
		fs.IntVar(&v.stackBytes, "stack-bytes", 0, "most stack bytes copied per thread (default: enough for the thread's stack, capped at 4 MiB"+map[bool]string{true: "; perf events copy 8 KiB, at most 63 KiB"}[name == "record"]+")")
	}
	if set&fRecord != 0 {
		fs.IntVarP(&v.freq, "freq", "F", 99, "sample `HZ` times per second")
		fs.DurationVarP(&v.duration, "duration", "d", 10*time.Second, "how long to record")
		fs.BoolVar(&v.perThread, "per-thread", false, "thread name as the root frame")
		fs.BoolVar(&v.idle, "idle", false, "also sample threads that are not running (a wall-clock profile)")
		fs.Var(&v.sampler, "sampler", "running threads: perf (perf events, no stop), ptrace (stops) or auto")
	}
	if set&fSandbox != 0 {
		fs.BoolVar(&v.noSandbox, "no-sandbox", false, "parse the target's files and stacks inside stackshot itself, not in an unprivileged child")
	}
	if set&fQuiet != 0 {
		fs.BoolVarP(&v.quiet, "quiet", "q", false, "no progress or warnings on stderr")
	}
}

// parse parses args and collects PIDs from flags and positional arguments.
func (c *common) parse(args []string, needPID bool) error {
	c.started = time.Now()
	if err := c.fs.Parse(args); err != nil {
		return cli.FlagError(c.fs, err, c.badID)
	}
	if cli.RouteLibraryLog(c.quiet); !c.quiet { // (net/http logs)
		cli.WarnHidden(c.fs, cli.Say)
	}
	if args = c.fs.Args(); c.files {
		args = nil // files or addresses, not pids
	}
	var err error
	if c.pids, err = cli.PIDs(c.pids, args); err != nil {
		return err
	}
	if needPID && len(c.pids) == 0 {
		return cli.Usage("no process id given", c.fs.Name()+" needs the PID of a running process",
			"e.g. 'stackshot "+c.fs.Name()+" 1234'; see 'stackshot help'")
	}
	return c.check()
}

// check validates flag values and their combinations.
func (c *common) check() error {
	if c.jsonOut && c.format != "" && c.format != "json" {
		return cli.Usage("--json and --format "+c.format+" disagree", "they name two formats", "give one of them")
	} else if c.jsonOut {
		c.format = "json"
	}
	c.kernel = c.kernel && !c.noKernel
	mode, err := ptrace.ParseMode(c.mode)
	switch name := c.fs.Name(); {
	case err != nil:
		return cli.Usage(fmt.Sprintf("--mode %q", c.mode), err.Error(), "")
	case name == "capture" && c.format != "" && c.format != "core":
		return cli.Usage("--format "+c.format, "capture writes a capture file, or an ELF core with --format core", "")
	case name != "record" && name != "capture" && c.format != "" && c.format != "text" && c.format != "json":
		return cli.Usage("--format "+c.format, name+" writes text or json", "")
	case c.maxFrames <= 0:
		return cli.Usage(fmt.Sprintf("--max-frames %d", c.maxFrames), "want a positive number", "")
	case c.timeout <= 0 && c.fs.Changed("timeout"):
		return cli.Usage("--timeout "+c.timeout.String(), "want a positive duration", "")
	case c.stackBytes < 0:
		return cli.Usage(fmt.Sprintf("--stack-bytes %d", c.stackBytes), "want 0 (the default) or more", "")
	case c.group && c.noGroup:
		return cli.UsageError{Msg: "--group and --no-group disagree"}
	case name == "dump" && cli.CheckSeries(c.fs, c.count, c.interval) != nil:
		return cli.CheckSeries(c.fs, c.count, c.interval)
	case c.consistent && mode == ptrace.ModeNoStop:
		return cli.Usage("--consistent with --mode nostop", "a consistent capture stops every thread; nostop stops none",
			"leave one of them out")
	case name == "record" && (c.freq <= 0 || c.freq > sampler.MaxFreq):
		return cli.Usage(fmt.Sprintf("--freq %d", c.freq), fmt.Sprintf("want 1 to %d samples per second", sampler.MaxFreq), "")
	case name == "record" && c.duration <= 0:
		return cli.Usage("--duration "+c.duration.String(), "want a positive duration", "")
	}
	return nil
}
