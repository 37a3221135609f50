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
