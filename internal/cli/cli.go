// Package cli holds what the command-line contract says of every command:
// the exit codes, usage errors in the contract's words, repeatable id
// flags, and pflag's errors translated into that form.
package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"stackshot/internal/safefile"
	"stackshot/internal/term"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Exit codes of the command-line contract.
const (
	ExitOK     = 0
	ExitTarget = 1 // a target could not be read
	ExitUsage  = 2 // bad usage
)

// UsageError is bad usage (exit 2). Its message is in the contract's
// words (see Usage); a bare one gets a pointer to the command's help.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// helpHint stands for "see 'stackshot CMD --help'" until the command is known.
const helpHint = "see 'stackshot \x00 --help'"

// Usage says what is wrong, why, and what to do ("": the help).
func Usage(what, why, do string) error {
	if do == "" {
		do = helpHint
	}
	if why == "" {
		return UsageError{what + " (" + do + ")"}
	}
	return UsageError{what + " (" + why + "; " + do + ")"}
}

// ExitError carries an exit code whose message was already said.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// Exit says what command cmd's err means, in one line through say, and
// returns the exit code.
func Exit(err error, cmd string, say func(string)) int {
	var ue UsageError
	var ee ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		if !strings.HasSuffix(ue.Msg, ")") {
			ue.Msg += " (" + helpHint + ")"
		}
		say(strings.ReplaceAll(ue.Msg, "\x00", cmd))
		return ExitUsage
	case errors.As(err, &ee):
		return ee.Code
	}
	say(err.Error())
	return ExitTarget
}

// IDList is a repeatable flag of process or thread ids, refused in the
// contract's words (not strconv's). The first refusal is kept in *Bad:
// pflag wraps what Set returns in its own words.
type IDList struct {
	IDs  *[]int
	What string // "process" or "thread"
	Bad  *error
}

func (l IDList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || id <= 0 {
			*l.Bad = Usage(fmt.Sprintf("%q is not a %s id", s, l.What), "want a positive number",
				"list them with 'ls /proc' or 'ls /proc/PID/task'")
			return *l.Bad
		}
		*l.IDs = append(*l.IDs, id)
	}
	return nil
}

func (l IDList) String() string { return strings.Trim(fmt.Sprint(*l.IDs), "[]") }
func (l IDList) Type() string   { return "id" }

// FlagError turns the error of fs.Parse into the contract's form (bad: an
// IDList's refusal, which it prefers).
func FlagError(fs *pflag.FlagSet, err, bad error) error {
	if err == pflag.ErrHelp {
		return err
	}
	if bad != nil {
		return bad
	}
	msg, name := err.Error(), fs.Name()
	var val, flag string
	switch _, scanErr := fmt.Sscanf(msg, "invalid argument %q for %q flag:", &val, &flag); {
	case strings.HasPrefix(msg, "unknown "):
		return Usage("unknown flag "+msg[strings.LastIndexByte(msg, ' ')+1:], name+" does not take it", "")
	case strings.HasPrefix(msg, "flag needs an argument: "):
		return Usage(strings.TrimPrefix(msg, "flag needs an argument: ")+" needs a value", "none was given", "")
	case scanErr == nil:
		why := strings.TrimSpace(msg[strings.Index(msg, " flag:")+6:]) // pflag's "must be an integer"
		return Usage(fmt.Sprintf("%s %q", flag[strings.LastIndex(flag, "--"):], val), why, "")
	}
	return Usage(msg, "bad usage", "")
}

// AddHidden registers, hidden, the flags add adds to fs: flags a command
// once took and ignores, accepted with a warning (see WarnHidden) on the
// contract's deprecation path.
func AddHidden(fs *pflag.FlagSet, add func()) {
	own := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { own[f.Name] = true })
	add()
	fs.VisitAll(func(f *pflag.Flag) { f.Hidden = !own[f.Name] })
}

// WarnHidden says, through say, which hidden flags were given.
func WarnHidden(fs *pflag.FlagSet, say func(string)) {
	fs.Visit(func(f *pflag.Flag) {
		if f.Hidden {
			say(fmt.Sprintf("--%s has no effect on %s (ignored; leave it out: a later release will refuse it)", f.Name, fs.Name()))
		}
	})
}

// PIDs adds the positional arguments args to pids, each a process id
// (refused in the contract's words), and returns them without repeats
// (the same pid twice is one target), in order.
func PIDs(pids []int, args []string) ([]int, error) {
	var bad error
	for _, a := range args {
		if (IDList{IDs: &pids, What: "process", Bad: &bad}).Set(a) != nil {
			return nil, Usage(fmt.Sprintf("%q is not a command or a process id", a), "want a number",
				"list processes with ps, or see 'stackshot help'")
		}
	}
	seen := map[int]bool{}
	uniq := pids[:0]
	for _, p := range pids {
		if !seen[p] {
			seen[p] = true
			uniq = append(uniq, p)
		}
	}
	return uniq, nil
}

// Failed is the error of a command that could not read failed of its
// targets (each already said): exit 1, or nil when none failed.
func Failed(failed int) error {
	if failed > 0 {
		return ExitError{Code: ExitTarget}
	}
	return nil
}

// NewFlagSet is a command's flag set: flags listed in the order they are
// added, and errors returned (see FlagError), never printed.
func NewFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	return fs
}

// Help writes to w the help that args ask for (stackshot help ARGS...):
// with no argument, the overview (help/overview.txt of pages); for a
// command, its page (help/NAME.txt: the usage, a line "examples:", the
// examples) with the flags it takes (flags) before the examples. A name
// that is not a command (flags nil) is bad usage, said on stderr.
//
// The overview (no argument) lists flags too: those of 'stackshot PID',
// the main use (dump's).
func Help(w io.Writer, pages fs.FS, args []string, flags *pflag.FlagSet) int {
	if len(args) == 0 {
		b, _ := fs.ReadFile(pages, "help/overview.txt")
		w.Write(b)
		if flags != nil {
			fmt.Fprintf(w, "\nflags of 'stackshot PID' (and 'stackshot dump'):\n%s", FlagUsages(flags))
		}
		return ExitOK
	}
	if flags == nil {
		fmt.Fprintf(os.Stderr, "stackshot: no command %q (the commands are dump, record, capture, report, symbolize and version; see 'stackshot help')\n", args[0])
		return ExitUsage
	}
	b, _ := fs.ReadFile(pages, "help/"+args[0]+".txt")
	text, examples, _ := strings.Cut(string(b), "\nexamples:\n")
	fmt.Fprintf(w, "usage: %s\nflags:\n%s\nexamples:\n%s", text, FlagUsages(flags), examples)
	return ExitOK
}

// CheckOutput makes sure the output file path (-o) could be written (the
// checks of safefile.Create, and a temporary file created beside it and
// removed) before a long recording starts; a directory is bad usage.
func CheckOutput(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return Usage("cannot write to "+path, "it is a directory", "give a file name, e.g. -o "+filepath.Join(path, "stacks.txt"))
	}
	return safefile.Check(path)
}

// CheckProfileOutput is CheckOutput for record's profile in format: a
// pprof profile (binary) is not written to a terminal either.
func CheckProfileOutput(format, path string) error {
	if format == "pprof" && (path == "" || path == "-") && term.IsTerminal(1) {
		return Usage("not writing a pprof profile to a terminal", "it is binary",
			"give -o FILE.pb.gz or redirect stdout")
	}
	return CheckOutput(path)
}

// Say writes "stackshot: MSG" on stderr, as one line. Messages name
// processes, threads, paths and files a target controls: everything a
// terminal would act on is escaped (term.Escape), embedded newlines
// included.
func Say(msg string) {
	fmt.Fprintln(os.Stderr, "stackshot: "+term.Escape(strings.TrimSuffix(msg, "\n")))
}

// CheckSeries checks dump's --count N and --interval DUR (fs, its flags):
// N from 1 to 1000, a positive DUR between snapshots, and no --interval
// without --count (one snapshot is not taken silently for a series asked
// with half its flags).
func CheckSeries(fs *pflag.FlagSet, count int, interval time.Duration) error {
	switch {
	case count < 1 || count > 1000:
		return UsageError{Msg: "--count must be between 1 and 1000"}
	case fs.Changed("interval") && !fs.Changed("count"):
		return Usage("--interval needs --count N", "it is the time between N snapshots", "e.g. '--interval 1s --count 5'")
	case count > 1 && interval <= 0:
		return UsageError{Msg: "--interval must be positive"}
	}
	return nil
}
