//go:build linux

package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestHelpSaysWhatTheContractSays: 'stackshot --help' lists the flags of
// 'stackshot PID' (dump's, the main use), as 'stackshot dump --help'
// does; no boolean prints [=true|false]; --group states when it is on by
// itself; record's --stack-bytes and --timeout say what the contract's
// table says.
func TestHelpSaysWhatTheContractSays(t *testing.T) {
	flagRE := regexp.MustCompile(`(?m)^  (?:-\w, )?\s*--[\w-]+.*$`)
	overview, _, _ := runSS(t, "--help")
	dump, _, _ := runSS(t, "dump", "--help")
	if a, b := flagRE.FindAllString(overview, -1), flagRE.FindAllString(dump, -1); len(a) < 20 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("--help lists %d flag lines, dump --help %d: want dump's flags in the overview:\n%s", len(a), len(b), overview)
	}
	record, _, _ := runSS(t, "record", "--help")
	for cmd, out := range map[string]string{"overview": overview, "dump": dump, "record": record} {
		if strings.Contains(out, "[=") || strings.Contains(out, "stringArray") {
			t.Errorf("%s help shows pflag's internals ([=true|false], stringArray):\n%s", cmd, out)
		}
	}
	line := func(out, flag string) string {
		return regexp.MustCompile(`(?m)^.*--` + flag + ` .*$`).FindString(out)
	}
	for _, c := range []struct{ out, flag, want string }{
		{dump, "group", "on past 64 threads or 256 goroutines"},
		{dump, "kernel", "(on by default)"},
		{record, "stack-bytes", "most stack bytes copied per thread (default: enough for the thread's stack, capped"},
		{record, "timeout", "bound on the whole command, recording included; threads that will not stop are reported from /proc"},
		{dump, "timeout", "bound on the whole command; threads that will not stop are reported from /proc (default 10s)"},
		{dump, "output", "-o, --output FILE "},
		{record, "freq", "-F, --freq HZ "},
	} {
		if l := line(c.out, c.flag); !strings.Contains(l, c.want) {
			t.Errorf("--%s: help line %q lacks %q", c.flag, l, c.want)
		}
	}
}
