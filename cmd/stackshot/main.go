//go:build linux

// Command stackshot shows what every thread of a live Linux process is
// doing, from the kernel down to main. See README.md and shared/CLI.md.
package main

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/pflag"

	"stackshot/internal/cli"
	"stackshot/internal/safefile"
	"stackshot/sandbox"
)

var version, commit = "0.1.0-dev", "unknown" // (set by the Makefile's -ldflags -X)

func main() {
	// The sandboxed child (see package sandbox): nothing else runs there.
	if len(os.Args) > 1 && os.Args[1] == sandbox.ChildCommand {
		os.Exit(sandbox.Main())
	}
	sandbox.Prepare()
	// STACKSHOT_CPUPROFILE=FILE profiles stackshot itself (for development).
	if path := os.Getenv("STACKSHOT_CPUPROFILE"); path != "" {
		f, err := safefile.Create(path, safefile.Private)
		if err == nil {
			pprof.StartCPUProfile(f)
			code := run(os.Args[1:])
			pprof.StopCPUProfile()
			cli.Exit(f.Commit(), "", cli.Say) // (says why the profile is not written)
			os.Exit(code)
		}
		cli.Exit(err, "", cli.Say)
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
			fmt.Printf("stackshot %s (commit %s, %s %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return cli.ExitOK
		case a == "help" || a == "-h" || a == "--help":
			return help(args[1:])
		case commands[a] != nil:
			cmd, args = a, args[1:]
		}
	}
	err := commands[cmd](args)
	for _, sym := range flushAtExit { // (their decoded tables go to the cache)
		sym.Flush()
	}
	if errors.Is(err, pflag.ErrHelp) {
		return help([]string{cmd})
	}
	return cli.Exit(err, cmd, cli.Say)
}

//go:embed help/*.txt
var helpFiles embed.FS

// help prints the overview with dump's flags, or a command's help with
// the flags it takes, to stdout.
func help(args []string) int {
	if len(args) > 0 && commands[args[0]] == nil {
		return cli.Help(os.Stdout, helpFiles, args, nil)
	}
	return cli.Help(os.Stdout, helpFiles, args, newCommon(append(args, "dump")[0]).fs) // (the overview: the main use's)
}
