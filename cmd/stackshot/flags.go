//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"stackshot/debuginfod"
	"stackshot/ptrace"
	"stackshot/symtab"
	"stackshot/unwind"
)

// common holds the flags of every command; each registers only the ones it
// takes (flagSets).
type common struct {
	fs                         *pflag.FlagSet
	pids, tids                 []int
	format, output, mode       string
	debugDirs                  []string
	jsonOut, kernel, noKernel  bool
	source, inline, noDemangle bool
	consistent, verbose, quiet bool
	maxFrames, stackBytes      int
	timeout                    time.Duration
	files                      bool  // positional arguments are not pids (report, symbolize)
	badID                      error // a -p or -t value that is not an id
	freq                       int   // record
	duration                   time.Duration
	perThread, idle            bool
	maxDebugBytes              int64
	sysroot                    string             // report: where the capture's files are looked up first
	coreMemory                 string             // capture: what memory a core carries
	perfMap                    string             // report: the JIT perf map of the captured process
	sampler                    string             // record: how running threads are sampled
	started                    time.Time          // when the command began: --timeout counts from here
	cancelSym                  context.CancelFunc // ends the symbolizer's deadline
	diag                       diagFlags          // dump: --group, --interval, --count (diagnose.go)
	goroutines, noGoroutines   bool               // dump: goroutines of Go processes (goroutines.go)
	otlp                       *otlpFlags         // record: sending to a collector (otlp.go)
	noDebuginfod               bool               // --no-debuginfod
	debuginfod                 *debuginfod.Client // fetches debug files by build id, or nil (debuginfod.go)
	noSandbox                  bool               // parse the target's bytes in-process (sandbox.go)
	boxExpired, boxBudget      bool               // what a sandboxed child's symbolizer could not do
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
	"record":    fPID | fFormat | fOutput | fTID | fKernel | fUnwind | fCapture | fQuiet | fRecord,
	"capture":   fPID | fFormat | fOutput | fTID | fKernel | fCapture | fQuiet | fSandbox,
	"report":    fFormat | fOutput | fTID | fKernel | fShow | fUnwind | fQuiet | fSandbox,
	"symbolize": fPID | fUnwind | fSandbox,
}

// fOld are the flags every command took before each took only its own.
const fOld = fPID | fFormat | fOutput | fTID | fKernel | fShow | fUnwind | fCapture | fQuiet

func newCommon(name string) *common {
	c := &common{fs: pflag.NewFlagSet(name, pflag.ContinueOnError), maxFrames: unwind.DefaultMaxFrames}
	c.fs.SortFlags = false
	c.fs.Usage = func() {}
	c.fs.SetOutput(io.Discard)
	c.register(name, flagSets[name], c)
	if name == "dump" {
		c.addDiagFlags()
		goroutineFlags(c)
	}
	if name == "record" {
		c.otlp = addOTLPFlags(c.fs)
	}
	// The old ones this command ignored stay accepted, hidden, with a
	// warning (the contract's deprecation path); their values go nowhere.
	own := map[string]bool{}
	c.fs.VisitAll(func(f *pflag.Flag) { own[f.Name] = true })
	c.register(name, fOld&^flagSets[name], &common{})
	c.fs.VisitAll(func(f *pflag.Flag) { f.Hidden = !own[f.Name] })
	return c
}

// register adds the flags of the groups in set, bound to v's fields.
func (c *common) register(name string, set int, v *common) {
	fs := c.fs
	if set&fPID != 0 {
		fs.VarP(&idList{&v.pids, "process", &c.badID}, "pid", "p", "target process (repeatable)")
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
		fs.StringVarP(&v.output, "output", "o", "", "write to FILE instead of stdout")
	}
	if set&fTID != 0 {
		fs.VarP(&idList{&v.tids, "thread", &c.badID}, "tid", "t", "only these threads (repeatable)")
	}
	if set&fKernel != 0 {
		fs.BoolVar(&v.kernel, "kernel", true, "add each thread's kernel frames")
		fs.BoolVar(&v.noKernel, "no-kernel", false, "no kernel frames")
	}
	if set&fShow != 0 {
		fs.BoolVarP(&v.source, "source", "s", false, "show file:line where debug info has it")
		fs.BoolVarP(&v.inline, "inline", "i", false, "expand inlined functions into their own frames")
		fs.BoolVarP(&v.verbose, "verbose", "v", false, "unwind methods, pauses, reasons stacks ended")
	}
	if set&fUnwind != 0 {
		if name != "symbolize" {
			fs.IntVar(&v.maxFrames, "max-frames", unwind.DefaultMaxFrames, "stop unwinding a thread after N frames")
		}
		fs.StringArrayVar(&v.debugDirs, "debug-dir", nil, "extra root for separate debug files (repeatable)")
		fs.Int64Var(&v.maxDebugBytes, "max-debug-bytes", 0, "most bytes of symbols and debug info read in all (default 512 MiB; a section gets half)")
		if name == "report" {
			fs.StringVar(&v.perfMap, "perf-map", "", "the JIT perf map (perf-PID.map) of the captured process")
			fs.StringVar(&v.sysroot, "sysroot", "/", "look the capture's files up under DIR first (checked by build id)")
		}
		fs.BoolVar(&v.noDemangle, "no-demangle", false, "keep raw symbol names")
		if v == c { // (new: not among the flags every command once took)
			fs.BoolVar(&v.noDebuginfod, "no-debuginfod", false, "never fetch debug files from the servers in DEBUGINFOD_URLS")
		}
	}
	if set&fCapture != 0 {
		fs.StringVar(&v.mode, "mode", "auto", "capture: auto, stop or nostop")
		fs.BoolVar(&v.consistent, "consistent", false, "stop all threads first, resume together")
		if name == "record" {
			fs.DurationVar(&v.timeout, "timeout", 0, "bound on the whole command, recording included (default: the duration + 10s)")
		} else {
			fs.DurationVar(&v.timeout, "timeout", 10*time.Second, "bound on the whole command")
		}
		fs.IntVar(&v.stackBytes, "stack-bytes", 0, "most stack bytes copied per thread (default: the thread's stack, capped at 4 MiB)")
	}
	if set&fRecord != 0 {
		fs.IntVarP(&v.freq, "freq", "F", 99, "samples per second")
		fs.DurationVarP(&v.duration, "duration", "d", 10*time.Second, "how long to record")
		fs.BoolVar(&v.perThread, "per-thread", false, "thread name as the root frame")
		fs.BoolVar(&v.idle, "idle", false, "also sample threads that are not running (a wall-clock profile)")
		fs.StringVar(&v.sampler, "sampler", "auto", "running threads: perf (perf events, no stop), ptrace (stops) or auto")
	}
	if set&fSandbox != 0 {
		fs.BoolVar(&v.noSandbox, "no-sandbox", false, "parse the target's files and stacks inside stackshot itself, not in an unprivileged child")
	}
	if set&fQuiet != 0 {
		fs.BoolVarP(&v.quiet, "quiet", "q", false, "no progress or warnings on stderr")
	}
}

// idList is a repeatable flag of process or thread ids, refused in the
// contract's words (not strconv's).
type idList struct {
	ids  *[]int
	what string
	bad  *error
}

func (l *idList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || id <= 0 {
			*l.bad = usageErr(fmt.Sprintf("%q is not a %s id", s, l.what), "want a positive number",
				"list them with 'ls /proc' or 'ls /proc/PID/task'")
			return *l.bad
		}
		*l.ids = append(*l.ids, id)
	}
	return nil
}

func (l *idList) String() string { return joinInts(*l.ids) }
func (l *idList) Type() string   { return "id" }

// parse parses args and collects PIDs from flags and positional arguments.
func (c *common) parse(args []string, needPID bool) error {
	c.started = time.Now()
	if err := c.fs.Parse(args); err != nil {
		return c.flagError(err)
	}
	c.fs.Visit(func(f *pflag.Flag) {
		if f.Hidden && !c.quiet {
			fmt.Fprintf(os.Stderr, "stackshot: --%s has no effect on %s (ignored; leave it out: a later release will refuse it)\n", f.Name, c.fs.Name())
		}
	})
	for _, a := range c.fs.Args() {
		if !c.files && (&idList{&c.pids, "process", &c.badID}).Set(a) != nil {
			return usageErr(fmt.Sprintf("%q is not a command or a process id", a), "want a number",
				"list processes with ps, or see 'stackshot help'")
		}
	}
	seen := map[int]bool{}
	uniq := c.pids[:0]
	for _, p := range c.pids {
		if !seen[p] { // the same pid twice is one target
			seen[p] = true
			uniq = append(uniq, p)
		}
	}
	if c.pids = uniq; needPID && len(c.pids) == 0 {
		return usageErr("no process id given", c.fs.Name()+" needs the PID of a running process",
			"e.g. 'stackshot "+c.fs.Name()+" 1234'; see 'stackshot help'")
	}
	return c.check()
}

// flagError turns pflag's errors into the contract's form.
func (c *common) flagError(err error) error {
	if err == pflag.ErrHelp {
		return err
	}
	if c.badID != nil {
		return c.badID
	}
	msg, name := err.Error(), c.fs.Name()
	var val, flag string
	switch _, scanErr := fmt.Sscanf(msg, "invalid argument %q for %q flag:", &val, &flag); {
	case strings.HasPrefix(msg, "unknown "):
		return usageErr("unknown flag "+msg[strings.LastIndexByte(msg, ' ')+1:], name+" does not take it", "")
	case strings.HasPrefix(msg, "flag needs an argument: "):
		return usageErr(strings.TrimPrefix(msg, "flag needs an argument: ")+" needs a value", "none was given", "")
	case scanErr == nil:
		why := strings.TrimSpace(msg[strings.Index(msg, " flag:")+6:]) // pflag's "must be an integer"
		return usageErr(fmt.Sprintf("%s %q", flag[strings.LastIndex(flag, "--"):], val), why, "")
	}
	return usageErr(msg, "bad usage", "")
}

// check validates flag values and their combinations.
func (c *common) check() error {
	if c.jsonOut && c.format != "" && c.format != "json" {
		return usageErr("--json and --format "+c.format+" disagree", "they name two formats", "give one of them")
	} else if c.jsonOut {
		c.format = "json"
	}
	c.kernel = c.kernel && !c.noKernel
	mode, err := c.captureMode()
	switch name := c.fs.Name(); {
	case err != nil:
		return err
	case name == "capture" && c.format != "" && c.format != "core":
		return usageErr("--format "+c.format, "capture writes a capture file, or an ELF core with --format core", "")
	case name != "record" && name != "capture" && c.format != "" && c.format != "text" && c.format != "json":
		return usageErr("--format "+c.format, name+" writes text or json", "")
	case c.maxFrames <= 0:
		return usageErr(fmt.Sprintf("--max-frames %d", c.maxFrames), "want a positive number", "")
	case c.timeout <= 0 && c.fs.Changed("timeout"):
		return usageErr("--timeout "+c.timeout.String(), "want a positive duration", "")
	case c.stackBytes < 0:
		return usageErr(fmt.Sprintf("--stack-bytes %d", c.stackBytes), "want 0 (the default) or more", "")
	case c.consistent && mode == ptrace.ModeNoStop:
		return usageErr("--consistent with --mode nostop", "a consistent capture stops every thread; nostop stops none",
			"leave one of them out")
	}
	return nil
}

// namesOnly reports whether the output needs function names only: plain
// text without -s or -i (dump and report). Then debug info is not loaded,
// which for a large debug file is most of a dump's time.
func (c *common) namesOnly() bool {
	switch c.fs.Name() {
	case "record", "symbolize":
		return false // profiles keep file:line; symbolize prints it
	}
	return (c.format == "" || c.format == "text") && !c.source && !c.inline
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
	return 0, usageErr(fmt.Sprintf("--mode %q", c.mode), "want auto, stop or nostop", "")
}

func goVersion() string { return runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH }

// newSymbolizer is the symbolizer the flags ask for; --timeout bounds it
// too (what is not resolved in time is shown unresolved).
func (c *common) newSymbolizer() *symtab.Symbolizer {
	o := symtab.Options{DebugDirs: c.debugDirs, NoDemangle: c.noDemangle, NamesOnly: c.namesOnly(),
		MaxDebugBytes: c.maxDebugBytes, PerfMap: c.perfMap}
	c.addFetchers(&o)
	if c.timeout > 0 {
		o.Context, c.cancelSym = context.WithDeadline(context.Background(), c.started.Add(c.timeout))
	}
	return symtab.New(o)
}

// symbolizerNotes says on stderr what the symbolizer could not do.
func (c *common) symbolizerNotes(sym *symtab.Symbolizer) {
	c.debuginfodNotes()
	if c.quiet {
		return
	}
	if sym.Expired() || c.boxExpired {
		printErr("stackshot: some frames are shown unresolved (symbolization did not finish within --timeout %v; give a longer --timeout)", c.timeout)
	}
	if sym.BudgetExceeded() || c.boxBudget {
		printErr("stackshot: some modules show fewer names (their symbols and debug info exceed the budget; raise it with --max-debug-bytes)")
	}
}
