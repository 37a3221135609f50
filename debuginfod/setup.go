//go:build linux

package debuginfod

import "io"

// Setup is a command's client: the servers, cache and timeout of the
// environment (FromEnv; its warnings go to say), files of at most maxBytes
// (0: DefaultMaxBytes), and progress lines on stderr unless quiet, rewritten
// in place when stderr is a terminal, else only when DEBUGINFOD_PROGRESS
// is set. nil when the environment names no server it can use.
func Setup(getenv func(string) string, maxBytes int64, quiet, terminal bool, stderr io.Writer, say func(string)) *Client {
	do, warnings := FromEnv(getenv)
	if !quiet {
		for _, w := range warnings {
			say(w)
		}
	}
	do.MaxBytes = maxBytes
	if !quiet {
		switch {
		case terminal:
			do.Progress, do.Terminal = stderr, true
		case getenv("DEBUGINFOD_PROGRESS") != "":
			do.Progress = stderr
		}
	}
	if cl := New(do); cl.Enabled() {
		return cl
	}
	return nil
}
