package output

import (
	"fmt"

	"stackshot/internal/term"

	"stackshot/report"
)

// waitVerb joins "waits" to what is waited for: "for mutex …", "in
// pthread_join".
func waitVerb(kind string) string {
	if kind == report.WaitJoin {
		return "in pthread_join"
	}
	return "for "
}

// heldBy joins what is waited for to its owner.
func heldBy(kind string) string {
	if kind == report.WaitJoin {
		return " for "
	}
	return " held by "
}

// lockText names what is waited for: `mutex pool_lock (0x…)`, `mutex
// 0x…`, `stdio lock of stdout (0x…)`; for a join, nothing (the joined
// thread follows).
func lockText(kind string, addr uint64, symbol string) string {
	if kind == report.WaitJoin {
		return ""
	}
	// (A symbol's name comes from the target's files: escaped.)
	symbol = term.Escape(symbol)
	what := kindText(kind)
	if kind == report.WaitStdio {
		what = "stdio lock"
		if symbol != "" {
			what += " of"
		}
	}
	switch {
	case symbol != "" && addr != 0:
		return fmt.Sprintf("%s %s (%#x)", what, symbol, addr)
	case addr != 0:
		return fmt.Sprintf("%s %#x", what, addr)
	case kind == report.WaitPythonGIL:
		return what // (the GIL is the interpreter's: no address to give)
	}
	return what + " at an unknown address"
}
