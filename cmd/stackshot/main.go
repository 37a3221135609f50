//go:build linux

// Command stackshot shows what every thread of a live Linux process is
// doing, from the kernel down to main. See README.md and shared/CLI.md.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/pflag"
)

// Exit codes of the command-line contract.
const (
	exitOK     = 0
	exitTarget = 1 // a target could not be read
	exitUsage  = 2 // bad usage
)

var (
	version = "0.1.0-dev"
	commit  = "unknown"
)

// usageError is bad usage (exit 2). Its message is in the contract's
// words (see usageErr); a bare one gets a pointer to the command's help.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// helpHint stands for "see 'stackshot CMD --help'" until the command is known.
const helpHint = "see 'stackshot \x00 --help'"

// usageErr says what is wrong, why, and what to do ("": the help).
func usageErr(what, why, do string) error {
	if do == "" {
		do = helpHint
	}
	if why == "" {
		return usageError{what + " (" + do + ")"}
	}
	return usageError{what + " (" + why + "; " + do + ")"}
}

func main() {
	// STACKSHOT_CPUPROFILE=FILE profiles stackshot itself (for development).
	if path := os.Getenv("STACKSHOT_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			code := run(os.Args[1:])
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(run(os.Args[1:]))
}

var commands = map[string]func([]string) error{
	"dump": cmdDump, "record": cmdRecord, "capture": cmdCapture, "report": cmdReport, "symbolize": cmdSymbolize,
}

func run(args []string) int {
	cmd := "dump"
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "version" || a == "--version":
			fmt.Printf("stackshot %s (commit %s, %s)\n", version, commit, goVersion())
			return exitOK
		case a == "help" || a == "-h" || a == "--help":
			return help(args[1:])
		case commands[a] != nil:
			cmd, args = a, args[1:]
		}
		// Otherwise "stackshot PID...": the pstack habit.
	}
	err := commands[cmd](args)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, pflag.ErrHelp) {
		commandHelp(cmd)
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		msg := ue.msg
		if !strings.HasSuffix(msg, ")") {
			msg += " (" + helpHint + ")"
		}
		fmt.Fprintf(os.Stderr, "stackshot: %s\n", strings.ReplaceAll(msg, "\x00", cmd))
		return exitUsage
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(os.Stderr, "stackshot: %v\n", err)
	return exitTarget
}

// exitError carries an exit code whose message was already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// help prints the overview, or one command's help, to stdout.
func help(args []string) int {
	if len(args) == 0 {
		fmt.Print(overview)
		return exitOK
	}
	if commands[args[0]] == nil {
		fmt.Fprintf(os.Stderr, "stackshot: no command %q (the commands are dump, record, capture, report, symbolize and version; see 'stackshot help')\n", args[0])
		return exitUsage
	}
	commandHelp(args[0])
	return exitOK
}

func commandHelp(name string) {
	h := helpTexts[name]
	c := newCommon(name)
	if name == "symbolize" {
		symbolizeFlags(c)
	}
	fmt.Printf("usage: %s\n\n%s\n\nflags:\n%s\nexamples:\n  %s\n", h[0], h[1], c.fs.FlagUsages(), strings.Join(h[2:], "\n  "))
}

const overview = `stackshot: what every thread of a live process is doing

usage:
  stackshot PID...                       same as 'stackshot dump PID...'
  stackshot dump [flags] PID...          one snapshot of every thread, printed
  stackshot record [flags] PID...        sample stacks, write a profile
  stackshot capture [flags] PID -o FILE  save a raw snapshot, without unwinding
  stackshot report [flags] FILE...       unwind and symbolize a saved capture
  stackshot symbolize [-e FILE] [-p PID] [-a] [ADDR...]
  stackshot version

Run 'stackshot help COMMAND' (or 'stackshot COMMAND --help') for its flags.
Exit status: 0 success, 1 a target could not be read, 2 bad usage.
`

// helpTexts: usage line, what the command does, two examples.
var helpTexts = map[string][]string{
	"dump": {"stackshot dump [flags] PID...",
		"One snapshot of every thread of each process, printed as text or JSON.",
		"stackshot dump 1234", "stackshot dump --json -s -o stacks.json 1234 5678"},
	"record": {"stackshot record [flags] PID...",
		"Sample stacks at a frequency for a duration and write a profile. On-CPU\nsamples only, unless --idle adds the threads that wait (a wall-clock profile).",
		"stackshot record -d 30s -o profile.pb.gz 1234", "stackshot record --idle -F 49 -d 1m -o flame-%p-%t.svg 1234"},
	"capture": {"stackshot capture [flags] PID -o FILE",
		"Save a raw snapshot (registers, stack bytes, maps, build ids), without\nunwinding; 'stackshot report' reads it later or on another machine.",
		"stackshot capture -o app.capture 1234", "stackshot capture --mode stop -o app-%t.capture 1234"},
	"report": {"stackshot report [flags] FILE...",
		"Unwind and symbolize a saved capture.",
		"stackshot report app.capture", "stackshot report --json -t 1240 --debug-dir ./debug app.capture"},
	"symbolize": {"stackshot symbolize [-e FILE] [-p PID] [-a] [ADDR...]",
		"Resolve addresses (arguments, or stdin one per line) in an ELF file or a\nlive process to function, file:line and inlined callers, as addr2line does.",
		"stackshot symbolize -e ./app -a 0x401136 0x4011a2", "stackshot symbolize -p 1234 --json 0x7f3a1c08f7e2"},
}
