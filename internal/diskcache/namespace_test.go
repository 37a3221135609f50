//go:build linux

package diskcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Namespaces keep entries apart: the same key in the main namespace and
// in two others holds three payloads, each found only where it was put;
// names that could leave the cache directory, and directories that are not
// stackshot's own, are refused.
func TestNamespacesApart(t *testing.T) {
	c := open(t, 0)
	a, err := c.Namespace("u1000-g1000")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Namespace("fabc")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Cache{c, a, b} {
		if err := x.Put(testKey, []byte(x.Dir())); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []*Cache{c, a, b} {
		if got, ok := x.Get(testKey, 1<<20); !ok || string(got) != x.Dir() {
			t.Fatalf("%s: got %q, %v", x.Dir(), got, ok)
		}
	}
	os.Remove(filepath.Join(a.Dir(), EntryName(testKey)))
	if _, ok := a.Get(testKey, 1<<20); ok {
		t.Fatal("a namespace's lookup found another's entry")
	}
	os.Remove(filepath.Join(c.Dir(), EntryName(testKey)))
	if _, ok := c.Get(testKey, 1<<20); ok {
		t.Fatal("the main namespace's lookup found a namespace's entry")
	}
	if a.Dir() != NamespaceDir(c.Dir(), "u1000-g1000") {
		t.Fatalf("namespace dir %s", a.Dir())
	}
	for _, bad := range []string{"", "..", "../x", "a/b", ".x", "U1000", "a b", strings.Repeat("a", 65)} {
		if _, err := c.Namespace(bad); err == nil {
			t.Errorf("namespace %q accepted", bad)
		}
	}
	if _, err := a.Namespace("x"); err == nil {
		t.Error("a namespace of a namespace")
	}
	// A symlink where a namespace would be, and a namespace others may
	// write to, are not used.
	os.Symlink(t.TempDir(), filepath.Join(c.Dir(), nsPrefix+"link"))
	if _, err := c.Namespace("link"); err == nil {
		t.Error("a symlinked namespace was used")
	}
	os.Mkdir(filepath.Join(c.Dir(), nsPrefix+"open"), 0o777)
	os.Chmod(filepath.Join(c.Dir(), nsPrefix+"open"), 0o777)
	if _, err := c.Namespace("open"); err == nil {
		t.Error("a world-writable namespace was used")
	}
}

// Eviction and the size bound cover every namespace: the oldest entries go
// first wherever they are, and namespaces left empty for long are removed.
func TestEvictCoversNamespaces(t *testing.T) {
	c := open(t, 10<<10)
	n1, err := c.Namespace("u1")
	if err != nil {
		t.Fatal(err)
	}
	n2, err := c.Namespace("u2")
	if err != nil {
		t.Fatal(err)
	}
	stale, err := c.Namespace("stale")
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(-time.Hour)
	os.Chtimes(stale.Dir(), hour, hour)
	where := []*Cache{c, n1, n2, c, n1}
	keys := make([]Key, len(where))
	payload := make([]byte, 3<<10)
	for i, x := range where {
		keys[i] = testKey
		keys[i].Ino = uint64(i)
		if err := x.Put(keys[i], payload); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(time.Duration(i-10) * time.Second)
		os.Chtimes(filepath.Join(x.Dir(), EntryName(keys[i])), old, old)
	}
	var have []int
	for i, x := range where {
		if _, err := os.Lstat(filepath.Join(x.Dir(), EntryName(keys[i]))); err == nil {
			have = append(have, i)
		}
	}
	// 3 of 3 KiB fit in 10 KiB: the oldest two (main's, then u1's) went.
	if len(have) != 3 || have[0] != 2 {
		t.Fatalf("entries left: %v", have)
	}
	if _, err := os.Stat(stale.Dir()); !os.IsNotExist(err) {
		t.Fatalf("an empty namespace unused for an hour is still there (%v)", err)
	}
	for _, x := range []*Cache{n1, n2} {
		if _, err := os.Stat(x.Dir()); err != nil {
			t.Fatalf("a namespace in use was removed: %v", err)
		}
	}
}

// ReadEntry (a sandboxed parser reading the descriptor its parent opened)
// checks what Get checks.
func TestReadEntry(t *testing.T) {
	c := open(t, 0)
	if err := c.Put(testKey, []byte("payload")); err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenEntry(testKey, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := ReadEntry(f, testKey, 1<<20); err != nil || string(b) != "payload" {
		t.Fatalf("%q, %v", b, err)
	}
	if _, err := ReadEntry(f, testKey, 3); err == nil {
		t.Error("a payload over the bound was returned")
	}
	other := testKey
	other.Part = "other"
	if _, err := ReadEntry(f, other, 1<<20); err == nil {
		t.Error("an entry of another key was returned")
	}
	if _, err := c.OpenEntry(other, 1<<20); err == nil {
		t.Error("opened an entry that does not exist")
	}
}
