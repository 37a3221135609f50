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

	"stackshot/internal/cli"
	"stackshot/internal/safefile"
	"stackshot/internal/term"
	"stackshot/sandbox"
)

var (
	version = "0.1.0-dev"
	commit  = "unknown"
)

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
			return cli.ExitOK
		case a == "help" || a == "-h" || a == "--help":
			return help(args[1:])
		case commands[a] != nil:
			cmd, args = a, args[1:]
		}
	}
	err := commands[cmd](args)
	if errors.Is(err, pflag.ErrHelp) {
		return help([]string{cmd})
	}
	return cli.Exit(err, cmd, func(msg string) { printErr("stackshot: %s", msg) })
}

//go:embed help/*.txt
var helpFiles embed.FS

// help prints the overview, or a command's help with the flags it takes,
// to stdout.
func help(args []string) int {
	if len(args) == 0 {
		b, _ := helpFiles.ReadFile("help/overview.txt")
		os.Stdout.Write(b)
		return cli.ExitOK
	}
	name := args[0]
	if commands[name] == nil {
		fmt.Fprintf(os.Stderr, "stackshot: no command %q (the commands are dump, record, capture, report, symbolize and version; see 'stackshot help')\n", name)
		return cli.ExitUsage
	}
	b, _ := helpFiles.ReadFile("help/" + name + ".txt")
	text, examples, _ := strings.Cut(string(b), "\nexamples:\n")
	c := newCommon(name)
	if name == "symbolize" {
		symbolizeFlags(c)
	}
	fmt.Printf("usage: %s\nflags:\n%s\nexamples:\n%s", text, c.fs.FlagUsages(), examples)
	return cli.ExitOK
}

// say writes one line on stderr.
func (c *common) say(msg string) { printErr("stackshot: %s", msg) }

// printErr writes one diagnostic line to stderr. Messages name processes,
// threads, paths and files the target controls: everything a terminal would
// act on is escaped (term.Escape), embedded newlines included, so a
// message stays one line.
func printErr(format string, args ...any) {
	msg := strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")
	fmt.Fprintln(os.Stderr, term.Escape(msg))
}
