//go:build linux

package diskcache

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var testKey = Key{Kind: "section", BuildID: "abcdef0123", Size: 1234, Dev: 7, Ino: 99, Ctime: 5, Part: ".debug_info@64+100"}

func open(t *testing.T, max int64) *Cache {
	t.Helper()
	c, err := Open(filepath.Join(t.TempDir(), "c"), max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPutParts: an entry written in parts (small ones gathered, large ones
// written as they are) is the entry of their concatenation, byte for byte.
func TestPutParts(t *testing.T) {
	c := open(t, 0)
	parts := [][]byte{[]byte("table"), bytes.Repeat([]byte("u"), 300<<10), nil, []byte("small"), bytes.Repeat([]byte("v"), 1000)}
	if err := c.PutParts(testKey, parts...); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(filepath.Join(c.Dir(), EntryName(testKey)))
	if err != nil {
		t.Fatal(err)
	}
	joined := bytes.Join(parts, nil)
	got, ok := c.Get(testKey, 1<<20)
	if !ok || !bytes.Equal(got, joined) {
		t.Fatalf("get after PutParts: ok=%v, %d bytes, want %d", ok, len(got), len(joined))
	}
	k2 := testKey
	k2.Part = "joined"
	if err := c.Put(k2, joined); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(filepath.Join(c.Dir(), EntryName(k2)))
	if err != nil {
		t.Fatal(err)
	}
	// The same file but for the key it holds (and so its checksum).
	if len(whole) != len(written)+len(k2.encode())-len(testKey.encode()) {
		t.Fatalf("entry of %d bytes in parts, %d joined", len(written), len(whole))
	}
}

func TestPutGet(t *testing.T) {
	c := open(t, 0)
	payload := bytes.Repeat([]byte("dwarf"), 1000)
	if _, ok := c.Get(testKey, 1<<20); ok {
		t.Fatal("hit in an empty cache")
	}
	if err := c.Put(testKey, payload); err != nil {
		t.Fatal(err)
	}
	got, ok := c.Get(testKey, 1<<20)
	if !ok || !bytes.Equal(got, payload) {
		t.Fatalf("get after put: ok=%v, %d bytes", ok, len(got))
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(c.Dir(), EntryName(testKey)), &st); err != nil || st.Mode&0o777 != 0o600 {
		t.Fatalf("entry mode %o (%v), want 0600", st.Mode&0o777, err)
	}
	if err := unix.Stat(c.Dir(), &st); err != nil || st.Mode&0o777 != 0o700 {
		t.Fatalf("directory mode %o (%v), want 0700", st.Mode&0o777, err)
	}
	// Each field of the key is part of the key.
	for _, k := range []Key{
		{Kind: "x", BuildID: testKey.BuildID, Size: testKey.Size, Dev: 7, Ino: 99, Ctime: 5, Part: testKey.Part},
		{Kind: testKey.Kind, BuildID: "abcdef0124", Size: testKey.Size, Dev: 7, Ino: 99, Ctime: 5, Part: testKey.Part},
		{Kind: testKey.Kind, BuildID: testKey.BuildID, Size: 1235, Dev: 7, Ino: 99, Ctime: 5, Part: testKey.Part},
		{Kind: testKey.Kind, BuildID: testKey.BuildID, Size: testKey.Size, Dev: 7, Ino: 99, Ctime: 6, Part: testKey.Part},
		{Kind: testKey.Kind, BuildID: testKey.BuildID, Size: testKey.Size, Dev: 7, Ino: 98, Ctime: 5, Part: testKey.Part},
	} {
		if _, ok := c.Get(k, 1<<20); ok {
			t.Errorf("hit for another key %+v", k)
		}
	}
	// More than the caller allows is a miss.
	if _, ok := c.Get(testKey, int64(len(payload)-1)); ok {
		t.Error("hit for an entry larger than the max asked")
	}
}

// A damaged entry is a miss and is removed; the next Put writes it anew.
func TestCorruptEntries(t *testing.T) {
	payload := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 300)
	good := Encode(testKey, payload)
	other := Encode(Key{Kind: "section", BuildID: "ffff"}, payload)
	for name, damage := range map[string]func(path string){
		"flipped payload byte": func(p string) { b := bytes.Clone(good); b[len(b)/2] ^= 0x40; os.WriteFile(p, b, 0o600) },
		"flipped crc":          func(p string) { b := bytes.Clone(good); b[len(b)-1] ^= 1; os.WriteFile(p, b, 0o600) },
		"truncated":            func(p string) { os.WriteFile(p, good[:len(good)-10], 0o600) },
		"empty":                func(p string) { os.WriteFile(p, nil, 0o600) },
		"another key":          func(p string) { os.WriteFile(p, other, 0o600) },
		"older format": func(p string) {
			b := bytes.Clone(good)
			b[8] = FormatVersion + 1
			os.WriteFile(p, b, 0o600)
		},
		"symlink to a good entry": func(p string) {
			os.WriteFile(p+".real", good, 0o600)
			os.Symlink(p+".real", p)
		},
		"group writable": func(p string) { os.WriteFile(p, good, 0o600); os.Chmod(p, 0o620) },
		"directory":      func(p string) { os.Mkdir(p, 0o700) },
	} {
		t.Run(name, func(t *testing.T) {
			c := open(t, 0)
			p := filepath.Join(c.Dir(), EntryName(testKey))
			damage(p)
			if _, ok := c.Get(testKey, 1<<20); ok {
				t.Fatal("a damaged entry was a hit")
			}
			if err := c.Put(testKey, payload); err != nil && name != "directory" {
				t.Fatal(err)
			}
			if name == "directory" {
				return // not a file: Put refuses to replace it, Get never reads it
			}
			got, ok := c.Get(testKey, 1<<20)
			if !ok || !bytes.Equal(got, payload) {
				t.Fatal("the entry was not rewritten")
			}
		})
	}
}

func TestUnsafeDirectory(t *testing.T) {
	base := t.TempDir()
	wide := filepath.Join(base, "wide")
	os.Mkdir(wide, 0o700)
	os.Chmod(wide, 0o777)
	if _, err := Open(wide, 0); err == nil || !strings.Contains(err.Error(), "other users may write") {
		t.Errorf("world-writable directory: %v", err)
	}
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	if _, err := Open(link, 0); err == nil {
		t.Error("a symlinked cache directory was used")
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		os.Chown(other, 65534, 65534)
		if _, err := Open(other, 0); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("another user's directory: %v", err)
		}
	}
	// Created 0700 with a missing parent.
	c, err := Open(filepath.Join(base, "new", "stackshot"), 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestEvictOldestFirst(t *testing.T) {
	c := open(t, 10<<10)
	payload := make([]byte, 3<<10)
	keys := make([]Key, 5)
	for i := range keys {
		keys[i] = testKey
		keys[i].Ino = uint64(i)
		if err := c.Put(keys[i], payload); err != nil {
			t.Fatal(err)
		}
		// mtimes a second apart, oldest first; key 0 is then used again.
		old := time.Now().Add(time.Duration(i-10) * time.Second)
		os.Chtimes(filepath.Join(c.Dir(), EntryName(keys[i])), old, old)
		if i == 1 {
			if _, ok := c.Get(keys[0], 1<<20); !ok {
				t.Fatal("miss right after put")
			}
			os.Chtimes(filepath.Join(c.Dir(), EntryName(keys[0])), old.Add(time.Second/2), old.Add(time.Second/2))
		}
	}
	var have []int
	for i, k := range keys {
		if _, err := os.Lstat(filepath.Join(c.Dir(), EntryName(k))); err == nil {
			have = append(have, i)
		}
	}
	// 3 entries of 3 KiB fit in 10 KiB: the newest (4, 3) and the last
	// put before them survive; key 1 is the oldest by use.
	if len(have) != 3 || have[len(have)-1] != 4 || have[len(have)-2] != 3 {
		t.Fatalf("entries left: %v", have)
	}
	for _, i := range have {
		if i == 1 {
			t.Fatalf("the least recently used entry survived: %v", have)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(testKey, []byte("payload")))
	f.Add(Encode(testKey, nil))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(testKey, b)
		if err == nil && !bytes.Equal(Encode(testKey, p), b) {
			t.Fatal("an entry that does not re-encode to itself was accepted")
		}
	})
}
