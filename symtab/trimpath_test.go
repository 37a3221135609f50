package symtab

import (
	"strings"
	"testing"
)

// TestGoTrimpathFiles: a Go build with -trimpath has "." for its
// compilation directory; its DWARF file names are the runtime's own
// ("goprog/main.go"), not "./goprog/main.go", which naming the same frame
// from pclntab alone gives too.
func TestGoTrimpathFiles(t *testing.T) {
	skipWithout(t, "go", "nm")
	bin := artifact(t, "goprog-trimpath", sh(`cd $SRC/goprog && go build -trimpath -o $OUT .`))
	m := openFileModule(t, New(Options{}), bin)
	var pc uint64
	for _, s := range runNM(t, bin, false) {
		if s.name == "main.main" {
			pc = s.addr
		}
	}
	if pc == 0 {
		t.Fatal("nm lists no main.main")
	}
	syms := m.Lookup(pc, nil)
	if len(syms) == 0 || syms[len(syms)-1].Function != "main.main" {
		t.Fatalf("main.main's entry names %+v", syms)
	}
	f := syms[len(syms)-1].File
	if !strings.HasSuffix(f, "main.go") || strings.HasPrefix(f, ".") || strings.Contains(f, "/./") {
		t.Errorf("main.main's file is %q, want the runtime's name for it (no ./)", f)
	}
	t.Logf("main.main: %s:%d", f, syms[len(syms)-1].Line)
}
