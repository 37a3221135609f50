package symtab

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDwz: debug info shared through a dwz file (.gnu_debugaltlink, names
// in DW_FORM_GNU_strp_alt, origins in DW_FORM_GNU_ref_alt), as Debian's
// and Fedora's debug packages ship it. dwz rewrites only the DWARF, so
// addr2line on the binary before dwz is the reference. The dwz file is
// found by its path, then (moved away) by its build id in a debug dir.
func TestDwz(t *testing.T) {
	skipWithout(t, "dwz", "addr2line", "readelf")
	for _, variant := range []string{"dwarf5", "dwarf4"} {
		t.Run(variant, func(t *testing.T) {
			orig := cxxDebug(t, variant)
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			common := filepath.Join(dir, "common.debug")
			copyFile(t, orig, a)
			copyFile(t, orig, b)
			// b differs a little so that dwz has something to share
			// and something not to.
			if o, err := exec.Command("dwz", "-m", common, "-M", common, a, b).CombinedOutput(); err != nil {
				t.Fatalf("dwz: %v\n%s", err, o)
			}
			pcs := funcPCs(t, orig, func(string) bool { return true })
			s := New(Options{})
			m := openFileModule(t, s, a)
			compareWithAddr2line(t, m, orig, true, pcs)
			s.Close()

			id := readelfBuildID(t, common)
			if id == "" {
				t.Fatal("dwz file has no build id")
			}
			debugRoot := filepath.Join(dir, "debugroot")
			moved := filepath.Join(debugRoot, ".build-id", id[:2], id[2:]+".debug")
			if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(common, moved); err != nil {
				t.Fatal(err)
			}
			s2 := New(Options{DebugDirs: []string{debugRoot}})
			defer s2.Close()
			compareWithAddr2line(t, openFileModule(t, s2, a), orig, true, pcs)
		})
	}
}
