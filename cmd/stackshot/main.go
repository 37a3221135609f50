//go:build linux

// Command stackshot shows what every thread of a live Linux process is
// doing, from the kernel down to main. See README.md and shared/CLI.md.
package main

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/pflag"

	"stackshot/internal/safefile"
	"stackshot/sandbox"
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

// exitError carries an exit code whose message was already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	// The sandboxed child (see package sandbox): nothing else runs there.
	if len(os.Args) > 1 && os.Args[1] == sandbox.ChildCommand {
		os.Exit(sandbox.Main())
	}
	sandbox.Prepare()
	// STACKSHOT_CPUPROFILE=FILE profiles stackshot itself (for development).
	if path := os.Getenv("STACKSHOT_CPUPROFILE"); path != "" {
		if f, err := safefile.Create(path, safefile.Private); err == nil {
			pprof.StartCPUProfile(f)
			code := run(os.Args[1:])
			pprof.StopCPUProfile()
			if err := f.Commit(); err != nil {
				fmt.Fprintf(os.Stderr, "stackshot: %v\n", err)
			}
			os.Exit(code)
		} else {
			fmt.Fprintf(os.Stderr, "stackshot: STACKSHOT_CPUPROFILE: %v\n", err)
		}
	}
	os.Exit(run(os.Args[1:]))
}

var commands = map[string]func([]string) error{
	"dump": cmdDump, "record": cmdRecord, "capture": cmdCapture, "report": cmdReport, "symbolize": cmdSymbolize,
}

func run(args []string) int {
	cmd := "dump" // "stackshot PID...": the pstack habit
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
	}
	err := commands[cmd](args)
	for _, sym := range flushAtExit {
		sym.Flush()
	}
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
	case errors.Is(err, pflag.ErrHelp):
		return help([]string{cmd})
	case errors.As(err, &ue):
		if !strings.HasSuffix(ue.msg, ")") {
			ue.msg += " (" + helpHint + ")"
		}
		printErr("stackshot: %s", strings.ReplaceAll(ue.msg, "\x00", cmd))
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	default:
		printErr("stackshot: %v", err)
		return exitTarget
	}
	return exitOK
}

//go:embed help/*.txt
var helpFiles embed.FS

// help prints the overview, or a command's help with the flags it takes,
// to stdout.
func help(args []string) int {
	if len(args) == 0 {
		b, _ := helpFiles.ReadFile("help/overview.txt")
		os.Stdout.Write(b)
		return exitOK
	}
	name := args[0]
	if commands[name] == nil {
		fmt.Fprintf(os.Stderr, "stackshot: no command %q (the commands are dump, record, capture, report, symbolize and version; see 'stackshot help')\n", name)
		return exitUsage
	}
	b, _ := helpFiles.ReadFile("help/" + name + ".txt")
	text, examples, _ := strings.Cut(string(b), "\nexamples:\n")
	c := newCommon(name)
	if name == "symbolize" {
		symbolizeFlags(c)
	}
	fmt.Printf("usage: %s\nflags:\n%s\nexamples:\n%s", text, c.fs.FlagUsages(), examples)
	return exitOK
}
