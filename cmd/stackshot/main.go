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

	"stackshot/internal/safefile"
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

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
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

func run(args []string) int {
	cmd := "dump"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "dump", "record", "capture", "report", "symbolize", "version", "help":
			cmd, args = args[0], args[1:]
		default:
			// "stackshot PID...": pstack habit.
		}
	}
	var err error
	switch cmd {
	case "dump":
		err = cmdDump(args)
	case "record":
		err = cmdRecord(args)
	case "capture":
		err = cmdCapture(args)
	case "report":
		err = cmdReport(args)
	case "symbolize":
		err = cmdSymbolize(args)
	case "version":
		fmt.Printf("stackshot %s (commit %s, %s)\n", version, commit, goVersion())
		return exitOK
	case "help":
		usage(os.Stdout)
		return exitOK
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		printErr("stackshot: %s (see 'stackshot help')", ue.msg)
		return exitUsage
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	printErr("stackshot: %v", err)
	return exitTarget
}

// exitError carries an exit code whose message was already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func usage(w *os.File) {
	fmt.Fprint(w, `stackshot: what every thread of a live process is doing

usage:
  stackshot PID...                       same as 'stackshot dump PID...'
  stackshot dump [flags] PID...          one snapshot of every thread, printed
  stackshot record [flags] PID...        sample stacks, write a profile
  stackshot capture [flags] PID -o FILE  save a raw snapshot, without unwinding
  stackshot report [flags] FILE          unwind and symbolize a saved capture
  stackshot symbolize [-e FILE] [-p PID] [-a] [ADDR...]
  stackshot version

Run 'stackshot dump --help' for the flags. Exit status: 0 success,
1 a target could not be read, 2 bad usage.
`)
}
