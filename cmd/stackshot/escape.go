//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"

	"stackshot/internal/term"
)

// printErr writes one diagnostic line to stderr. Messages name processes,
// threads, paths and files the target controls: everything a terminal would
// act on is escaped (term.Escape), embedded newlines included, so a
// message stays one line.
func printErr(format string, args ...any) {
	msg := strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")
	fmt.Fprintln(os.Stderr, term.Escape(msg))
}
