//go:build linux

package sandbox

import "fmt"

// TryStart starts a child for target t, or says through say, in one line,
// why the parsing of what (e.g. "process 42") stays in-process, and
// returns nil.
func TryStart(cfg Config, t Target, what string, say func(string)) *Child {
	child, err := Start(cfg, t)
	if err != nil {
		say(fmt.Sprintf("%s is parsed inside stackshot itself (%v; --no-sandbox says this is intended)", what, err))
		return nil
	}
	return child
}
