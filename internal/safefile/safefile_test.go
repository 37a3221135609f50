//go:build linux

package safefile

import (
	"os"
	"path/filepath"
	"testing"
)

// A directory every user may write to, without the sticky bit, lets any
// of them rename the temporary file away and put their own in its place.
func TestRefusesOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	if err := WriteFile(filepath.Join(dir, "out"), []byte("x"), Public); err == nil {
		t.Errorf("wrote into a world-writable directory that is not sticky")
	}
	os.Chmod(dir, 0o777|os.ModeSticky)
	if err := WriteFile(filepath.Join(dir, "out"), []byte("x"), Public); err != nil {
		t.Errorf("sticky directory refused: %v", err)
	}
}

// Nothing appears at the destination before Commit; Abort leaves the
// directory as it was; a streamed file lands whole with its mode.
func TestCreateCommitAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prof")
	f, err := Create(path, Private)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("part"))
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("destination exists before Commit")
	}
	f.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Abort left %v", ents)
	}
	os.WriteFile(path, []byte("old"), 0o644)
	f, err = Create(path, Private)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("one "))
	f.Write([]byte("two"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "one two" || fi.Mode().Perm() != 0o600 {
		t.Errorf("got %q mode %v", b, fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left %v", ents)
	}
	if err := Check(filepath.Join(dir, "missing", "x")); err == nil {
		t.Errorf("Check accepted a missing directory")
	}
	if err := Check(dir + "/"); err == nil {
		t.Errorf("Check accepted a directory as a file name")
	}
}
