// Package bin holds the small helpers every parser of target-controlled
// bytes in stackshot shares: a sticky-error decoder over a byte slice and
// the one error type for malformed input (a panic of a parser becomes an
// error through internal/contain). It imports nothing of the project, so
// unwind and symtab can both use it without importing each other.
package bin

import (
	"fmt"
)

// FormatError reports malformed input: which section (or file part), at
// which offset in it, and what is wrong.
type FormatError struct {
	Section string
	Offset  uint64
	Msg     string
}

func (e *FormatError) Error() string {
	if e.Section == "" {
		return "malformed elf: " + e.Msg
	}
	return fmt.Sprintf("malformed %s at %#x: %s", e.Section, e.Offset, e.Msg)
}
