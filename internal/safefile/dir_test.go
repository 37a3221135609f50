//go:build linux

package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OpenDir opens the directory a path names, however it is spelt, creating
// it 0700; a name that is no directory's is refused.
func TestOpenDirNames(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	for _, name := range []string{"a", "b/", "./c", filepath.Join(base, "d") + "//"} {
		d, err := OpenDir(name, "the test directory")
		if err != nil {
			t.Errorf("%q: %v", name, err)
			continue
		}
		var fi, want os.FileInfo
		fi, _ = d.Stat()
		want, err = os.Lstat(filepath.Join(base, strings.Trim(filepath.Base(filepath.Clean(name)), "/")))
		if err != nil || !os.SameFile(fi, want) || want.Mode().Perm() != 0o700 {
			t.Errorf("%q opened %v, want the directory %s made 0700 (%v)", name, fi.Name(), filepath.Base(name), err)
		}
		d.Close()
	}
	if ents, _ := os.ReadDir(base); len(ents) != 4 {
		t.Errorf("made %d entries, want the 4 directories", len(ents))
	}
	for _, name := range []string{"", ".", "..", "/"} {
		if _, err := OpenDir(name, "the test directory"); err == nil || !strings.Contains(err.Error(), "give the directory by its name") {
			t.Errorf("%q: %v", name, err)
		}
	}
}
