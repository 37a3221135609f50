package cli

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// pflag's errors come out in the contract's words, with the command's name
// in the help pointer once Exit knows it.
func TestFlagErrorInContractWords(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "unknown flag --nope (dump does not take it; see 'stackshot dump --help')"},
		{[]string{"--count"}, "--count needs a value (none was given; see 'stackshot dump --help')"},
		{[]string{"--count", "x"}, `--count "x" (must be an integer; see 'stackshot dump --help')`},
		{[]string{"-p", "12,abc"}, `"abc" is not a process id (want a positive number; list them with 'ls /proc' or 'ls /proc/PID/task')`},
	} {
		fs := NewFlagSet("dump")
		var pids []int
		var bad error
		fs.Int("count", 1, "")
		fs.VarP(IDList{IDs: &pids, What: "process", Bad: &bad}, "pid", "p", "")
		err := FlagError(fs, fs.Parse(c.args), bad)
		var said string
		if code := Exit(err, "dump", func(s string) { said = s }); code != ExitUsage || said != c.want {
			t.Errorf("%v: exit %d, said %q; want exit 2, %q", c.args, code, said, c.want)
		}
	}
}

func TestPIDs(t *testing.T) {
	got, err := PIDs([]int{7}, []string{"3", "7", "3", "9"})
	if err != nil || !reflect.DeepEqual(got, []int{7, 3, 9}) {
		t.Errorf("got %v, %v; want [7 3 9]", got, err)
	}
	if _, err := PIDs(nil, []string{"dumpp"}); err == nil || err.Error() != `"dumpp" is not a command or a process id (want a number; list processes with ps, or see 'stackshot help')` {
		t.Errorf("a word: %v", err)
	}
}

func TestExitCodes(t *testing.T) {
	var said []string
	say := func(s string) { said = append(said, s) }
	if Exit(nil, "dump", say) != ExitOK || Exit(Failed(0), "dump", say) != ExitOK {
		t.Error("no error: not exit 0")
	}
	if Exit(Failed(2), "dump", say) != ExitTarget || len(said) != 0 {
		t.Errorf("failed targets: not exit 1 without a word (said %q)", said)
	}
	if Exit(errors.New("cannot read process 1 (why; what)"), "dump", say) != ExitTarget || len(said) != 1 {
		t.Errorf("an error: not exit 1 with it said (said %q)", said)
	}
}

// A library's log messages come out as warnings: one line each, bounded,
// each once, at most maxLibraryLines.
func TestLibraryLog(t *testing.T) {
	var said []string
	l := &libraryLog{say: func(m string) { said = append(said, m) }}
	l.Write([]byte("Unsolicited response received on idle HTTP channel starting with \"HTTP/1.1\"; err=<nil>\n"))
	l.Write([]byte("Unsolicited response received on idle HTTP channel starting with \"HTTP/1.1\"; err=<nil>\n"))
	l.Write([]byte("two\nlines\x1b[31m " + strings.Repeat("x", 500)))
	if len(said) != 2 || said[0] != `warning: a library said: Unsolicited response received on idle HTTP channel starting with "HTTP/1.1"; err=<nil>` {
		t.Fatalf("said %q", said)
	}
	if strings.Contains(said[1], "\n") || len(said[1]) > len("warning: a library said: ")+maxLibraryLine+3 || !strings.HasSuffix(said[1], "...") {
		t.Errorf("long message said as %q", said[1])
	}
	for i := range 10 {
		l.Write([]byte(fmt.Sprint("message ", i)))
	}
	if len(said) != maxLibraryLines {
		t.Errorf("%d lines said, want at most %d", len(said), maxLibraryLines)
	}
}
