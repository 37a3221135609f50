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

// Symlinks in the directory path are followed (when ours) with a bound:
// a loop is an error, not a hang; relative and absolute targets resolve.
func TestWalkDirLinks(t *testing.T) {
	dir := t.TempDir()
	os.Symlink("loop", filepath.Join(dir, "loop"))
	if err := Check(filepath.Join(dir, "loop", "x")); err == nil {
		t.Errorf("a symlink loop was accepted")
	}
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.Symlink("a/b/../b", filepath.Join(dir, "rel"))
	os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "abs"))
	// Each names a/b (physically: ".." after a link goes up from where
	// the link led, as the kernel does).
	for i, p := range []string{"rel/f0", "abs/b/f1", "abs/../rel/f2"} {
		if err := WriteFile(filepath.Join(dir, p), []byte(p), Public); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "a", "b", "f"+string(rune('0'+i)))); string(b) != p {
			t.Errorf("%s: a/b holds %q", p, b)
		}
	}
}

// CreateAt writes a plain name in an open directory: mode as asked,
// nothing before Commit, a symlink or a path refused, the caller's
// descriptor left open.
func TestCreateAt(t *testing.T) {
	base := t.TempDir()
	dir, err := os.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, bad := range []string{"", ".", "..", "a/b"} {
		if _, err := CreateAt(dir, bad, Private); err == nil {
			t.Errorf("CreateAt(%q) accepted", bad)
		}
	}
	f, err := CreateAt(dir, "entry", Private)
	if err != nil {
		t.Fatal(err)
	}
	f.SkipSync()
	f.Write([]byte("data"))
	if _, err := os.Lstat(filepath.Join(base, "entry")); err == nil {
		t.Error("entry exists before Commit")
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(filepath.Join(base, "entry"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("entry: %v %v, want mode 0600", st, err)
	}
	if _, err := dir.Stat(); err != nil {
		t.Fatalf("the caller's directory was closed: %v", err)
	}
	os.Symlink("/etc/passwd", filepath.Join(base, "link"))
	if _, err := CreateAt(dir, "link", Private); err == nil {
		t.Error("CreateAt over a symlink accepted")
	}
	if ents, _ := os.ReadDir(base); len(ents) != 2 {
		t.Errorf("directory holds %d entries, want entry and link", len(ents))
	}
}
