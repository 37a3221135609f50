package symtab

import (
	"path/filepath"
	"stackshot/internal/testutil"
	"strings"
	"testing"
)

// TestModulePanicContained: a panic while one module's sources load (a
// parser bug on its hostile input) costs that module its names, and only
// it: another module of the same Symbolizer still resolves, the failed
// one keeps answering "unknown" without panicking again, and its
// diagnostics carry the panic.
func TestModulePanicContained(t *testing.T) {
	dir := t.TempDir()
	bad := writeBomb(t, "bad.elf", testutil.BombELF(nil, nil))
	good := filepath.Join(dir, "good.elf")
	if err := writeFile(good, testutil.BombELF(nil, nil)); err != nil {
		t.Fatal(err)
	}
	loadHook = func(p string) {
		if p == bad {
			panic("parser bug")
		}
	}
	defer func() { loadHook = nil }()

	s := New(Options{})
	defer s.Close()
	mb, err := s.Module(ModuleRef{Path: bad})
	if err != nil {
		t.Fatal(err)
	}
	mg, err := s.Module(ModuleRef{Path: good})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if got := mb.Lookup(testutil.BombFuncAddr+0x10, nil); len(got) != 0 {
			t.Errorf("lookup %d in the module that panicked: %+v, want nothing", i, got)
		}
	}
	if got := lookupName(mg, testutil.BombFuncAddr+0x10); got != "bomb_func" {
		t.Errorf("the other module: %q, want bomb_func", got)
	}
	errs := mb.sources().errs
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "parser bug") {
		t.Errorf("diagnostics of the failed module: %v, want the panic", errs)
	}
}
