package symtab

import (
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// maxDemangleInput bounds the names handed to the demangler (its work grows
// with the input; hostile names can be long).
const maxDemangleInput = 4096

// Demangle returns the demangled form of a C++ or Rust (legacy or v0)
// symbol, with Rust's hash dropped, or name unchanged.
func Demangle(name string) string {
	if len(name) < 3 || len(name) > maxDemangleInput {
		return name
	}
	// Only names that look mangled: _Z (C++, Rust legacy), _R (Rust v0),
	// and the same with the extra underscore some platforms add.
	n := name
	if strings.HasPrefix(n, "__Z") || strings.HasPrefix(n, "__R") {
		n = n[1:]
	}
	if !strings.HasPrefix(n, "_Z") && !strings.HasPrefix(n, "_R") {
		return name
	}
	if r, ok := demangleRustLegacy(n); ok {
		return r
	}
	var s string
	err := safely("demangle", func() error {
		var err error
		s, err = demangle.ToString(n, demangle.MaxLength(16))
		return err
	})
	if err != nil || s == "" {
		return name
	}
	return dropRustHash(s)
}

// dropRustHash removes a legacy Rust hash ("::h" and 16 hex digits) at the
// end of a demangled path, in case the demangler kept it.
func dropRustHash(s string) string {
	i := strings.LastIndex(s, "::h")
	if i < 0 || len(s)-(i+3) != 16 {
		return s
	}
	for _, c := range s[i+3:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return s
		}
	}
	return s[:i]
}

// rustEscapes are the "$...$" escapes of Rust's legacy mangling.
var rustEscapes = map[string]string{
	"SP": "@", "BP": "*", "RF": "&", "LT": "<", "GT": ">", "LP": "(", "RP": ")", "C": ",",
}

// demangleRustLegacy demangles a legacy Rust symbol (an Itanium-style
// _ZN...E path whose last element is the hash "h" + 16 hex digits), hash
// dropped. It keeps identifiers' leading underscores ("__rust_begin_short_
// backtrace"), which the general demangler loses, and decodes the "$..$"
// and ".." escapes. ok is false for anything else.
func demangleRustLegacy(n string) (string, bool) {
	if !strings.HasPrefix(n, "_ZN") {
		return "", false
	}
	rest := n[3:]
	var parts []string
	for len(rest) > 0 && rest[0] != 'E' {
		l := 0
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			l = l*10 + int(rest[i]-'0')
			if l > len(rest) {
				return "", false
			}
			i++
		}
		if i == 0 || i+l > len(rest) || l == 0 {
			return "", false
		}
		parts = append(parts, rest[i:i+l])
		rest = rest[i+l:]
	}
	if rest != "E" || len(parts) < 2 {
		return "", false
	}
	hash := parts[len(parts)-1]
	if len(hash) != 17 || hash[0] != 'h' {
		return "", false
	}
	for _, c := range hash[1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	var b strings.Builder
	for k, p := range parts[:len(parts)-1] {
		if k > 0 {
			b.WriteString("::")
		}
		if strings.HasPrefix(p, "_$") {
			p = p[1:]
		}
		for len(p) > 0 {
			switch {
			case p[0] == '$':
				end := strings.IndexByte(p[1:], '$')
				if end < 0 {
					return "", false
				}
				esc := p[1 : 1+end]
				if r, ok := rustEscapes[esc]; ok {
					b.WriteString(r)
				} else if len(esc) > 1 && esc[0] == 'u' {
					var v rune
					for _, c := range esc[1:] {
						switch {
						case c >= '0' && c <= '9':
							v = v*16 + c - '0'
						case c >= 'a' && c <= 'f':
							v = v*16 + c - 'a' + 10
						default:
							return "", false
						}
						if v > 0x10ffff {
							return "", false
						}
					}
					b.WriteRune(v)
				} else {
					return "", false
				}
				p = p[end+2:]
			case strings.HasPrefix(p, ".."):
				b.WriteString("::")
				p = p[2:]
			default:
				b.WriteByte(p[0])
				p = p[1:]
			}
		}
	}
	return b.String(), true
}
