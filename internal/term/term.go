// Package term makes text that came from a target (process, thread,
// function, file and module names, paths, notes naming them) safe to print
// on an operator's terminal.
//
// A target controls those strings: a thread named "\x1b[2J\x1b[31m..."
// would clear and recolour the screen of whoever dumps it, and escape
// sequences can do worse (set the window title, rewrite earlier lines, on
// some terminals answer back into the input). Escape turns every byte or
// character a terminal may act on into a visible escape: C0 controls and
// DEL as \x1b, invalid UTF-8 bytes as \xff, C1 controls and the Unicode
// bidirectional controls (which reorder what is shown: "Trojan source") as
// \u202e. Backslashes are left as they are: names with one are rare and
// harmless, and escaping them would change every Windows-style path.
//
// The package imports nothing of the project: the output formats and the
// command both use it.
package term

import (
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// Unsafe reports whether a terminal may act on r rather than show it:
// C0 and C1 controls, DEL, and the bidirectional formatting characters.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, // ALM, LRM, RLM
		r >= 0x202a && r <= 0x202e, // LRE RLE PDF LRO RLO
		r >= 0x2066 && r <= 0x2069: // LRI RLI FSI PDI
		return true
	}
	return false
}

// Escape returns s with every unsafe character and invalid UTF-8 byte
// replaced by an escape; s itself when it holds none (no allocation).
func Escape(s string) string {
	if clean(s, false) {
		return s
	}
	return string(appendEscaped(make([]byte, 0, len(s)+16), s, false))
}

// EscapeText is Escape for a whole rendered text report: newlines and
// tabs, which the report's own layout uses, are kept. It is a second line
// of defence behind Escape on each field, for fields a renderer forgot.
func EscapeText(b []byte) []byte {
	if clean(view(b), true) {
		return b
	}
	return appendEscaped(make([]byte, 0, len(b)+16), view(b), true)
}

// view is b as a string without a copy; b is only read while it is used.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// clean reports whether s needs no escaping (ASCII fast path first).
func clean(s string, layout bool) bool {
	i := 0
	// Eight bytes at a time: a word of ASCII with no control or DEL byte
	// (a text's newlines and tabs aside) is passed whole (a 1,000-frame
	// report is 60 KB to check, a newline in every other word); any other
	// is looked at byte by byte. On ASCII bytes (< 0x80) each sum below
	// stays inside its byte, so no lane disturbs another.
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8] // (one bounds check, then one load)
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		const ones, highs = 0x0101010101010101, 0x8080808080808080
		if x&highs == 0 {
			bad := ^(x+0x60*ones)&highs | (x+ones)&highs // a byte < 0x20, or DEL
			if layout && bad != 0 {
				nl, tab := x^'\n'*ones, x^'\t'*ones // zero bytes where x has them
				bad &^= ^(nl+0x7f*ones)&highs | ^(tab+0x7f*ones)&highs
			}
			if bad == 0 {
				continue
			}
		}
		for j := i; j < i+8; j++ {
			if c := s[j]; c >= 0x80 {
				return cleanRunes(s[j:], layout)
			} else if (c < 0x20 || c == 0x7f) && !(layout && (c == '\n' || c == '\t')) {
				return false
			}
		}
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return cleanRunes(s[i:], layout)
		}
		if (c < 0x20 || c == 0x7f) && !(layout && (c == '\n' || c == '\t')) {
			return false
		}
	}
	return true
}

func cleanRunes(s string, layout bool) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if Unsafe(r) && !(layout && (r == '\n' || r == '\t')) {
			return false
		}
		i += n
	}
	return true
}

const hexDigits = "0123456789abcdef"

func appendEscaped(out []byte, s string, layout bool) []byte {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			out = append(out, '\\', 'x', hexDigits[s[i]>>4], hexDigits[s[i]&0xf])
		case layout && (r == '\n' || r == '\t'):
			out = append(out, byte(r))
		case r < 0x80 && Unsafe(r):
			out = append(out, '\\', 'x', hexDigits[r>>4], hexDigits[r&0xf])
		case Unsafe(r):
			out = append(out, '\\', 'u')
			h := strconv.FormatInt(int64(r), 16)
			for k := len(h); k < 4; k++ {
				out = append(out, '0')
			}
			out = append(out, h...)
		default:
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return out
}

// EscapeJSON makes an encoded JSON document safe to print: encoding/json
// escapes C0 controls but writes DEL, C1 controls and bidirectional
// overrides raw. Each becomes its \u escape, which decodes to the same
// value. Only strings hold non-ASCII characters or DEL in encoded JSON, so
// the document keeps its meaning; newlines and indentation are kept.
func EscapeJSON(b []byte) []byte {
	if clean(view(b), true) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r >= 0x7f && Unsafe(r) {
			out = append(out, '\\', 'u')
			h := strconv.FormatInt(int64(r), 16)
			for k := len(h); k < 4; k++ {
				out = append(out, '0')
			}
			out = append(out, h...)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
