//go:build linux

package otlp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSpoolRefuses(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o700)
	link := filepath.Join(base, "link")
	os.Symlink(real, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	shared := filepath.Join(base, "shared")
	os.Mkdir(shared, 0o700)
	os.Chmod(shared, 0o777)
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777) // (not sticky: anyone may swap what is in it)
	cases := map[string]string{
		filepath.Join(open, "spool"):      "writable by every user and not sticky",
		link:                              "is a symbolic link",
		file:                              "is not a directory",
		shared:                            "writable by other users",
		filepath.Join(base, "no", "such"): "cannot create the spool directory",
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[other] = "belongs to uid 65534"
		// A directory of ours nothing can be created in, even by root.
		cases[fmt.Sprintf("/proc/%d/fdinfo", os.Getpid())] = "writ"
	} else {
		ro := filepath.Join(base, "ro")
		os.Mkdir(ro, 0o500)
		cases[ro] = "not writable"
	}
	for dir, want := range cases {
		_, err := OpenSpool(dir, 10, 1<<20, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", dir, err, want)
		}
	}
	if _, err := OpenSpool(real, 10, 1<<20, nil); err != nil {
		t.Errorf("a good directory: %v", err)
	}
}

func TestSpoolPut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	sp, err := OpenSpool(dir, 10, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(dir); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("created spool %v %v", st.Mode(), err)
	}
	b := body(t, 42)
	path, err := sp.Put(b)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Perm() != 0o600 || !st.Mode().IsRegular() {
		t.Fatalf("spooled file %v %v", st.Mode(), err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, b) {
		t.Error("spooled file differs from the body")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("spool holds %d entries, want the one profile (no temporary files left)", len(ents))
	}
	if _, err := sp.Put(make([]byte, 2<<20)); err == nil || !strings.Contains(err.Error(), "larger than the spool's bound") {
		t.Errorf("an oversized profile: %v", err)
	}
}

func TestSpoolBounds(t *testing.T) {
	var warned []string
	warn := func(m string) { warned = append(warned, m) }
	sp, err := OpenSpool(t.TempDir(), 3, 1<<20, warn)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range 5 {
		p, err := sp.Put(body(t, int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Base(p))
	}
	files, _ := sp.list()
	var names []string
	for _, f := range files {
		names = append(names, f.name)
	}
	if !slices.Equal(names, paths[2:]) {
		t.Errorf("spool holds %v, want the newest three %v", names, paths[2:])
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "dropped its oldest profile "+paths[0]) || !strings.Contains(warned[1], paths[1]) {
		t.Errorf("warnings %q", warned)
	}

	// The byte bound: each body is some hundred bytes; room for two.
	n := int64(len(body(t, 0)))
	warned = nil
	sp2, err := OpenSpool(t.TempDir(), 100, 2*n+n/2, warn)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := sp2.Put(body(t, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if sp2.Pending() != 2 || len(warned) != 2 {
		t.Errorf("%d spooled with %d warnings, want 2 and 2", sp2.Pending(), len(warned))
	}
}

// TestSpoolConcurrent: two runs spooling into one directory at once, then
// two flushing it at once: every profile arrives exactly once.
func TestSpoolConcurrent(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var warned []string
	warn := func(m string) { mu.Lock(); warned = append(warned, m); mu.Unlock() }
	const per = 40
	var wg sync.WaitGroup
	for r := range 2 {
		sp, err := OpenSpool(dir, 1000, 64<<20, warn)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := range per {
				if _, err := sp.Put(body(t, int64(r*per+i))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	c := newCollector(t, nil)
	sent := make([]int, 2)
	for r := range 2 {
		sp, _ := OpenSpool(dir, 1000, 64<<20, warn)
		s := c.sender(nil)
		wg.Go(func() {
			n, err := sp.Flush(context.Background(), s.Once)
			if err != nil {
				t.Error(err)
			}
			sent[r] = n
		})
	}
	wg.Wait()
	got := c.received()
	slices.Sort(got)
	for i := range 2 * per {
		if i >= len(got) || got[i] != int64(i) {
			t.Fatalf("received %v, want each of 0..%d once", got, 2*per-1)
		}
	}
	if len(got) != 2*per || sent[0]+sent[1] != 2*per {
		t.Errorf("received %d, flushes say %d+%d", len(got), sent[0], sent[1])
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 || len(warned) != 0 {
		t.Errorf("left in the spool: %d entries; warnings %q", len(ents), warned)
	}
}

// TestSpoolConcurrentTrim: two runs spooling past the bound at once drop
// each file once, with one warning each.
func TestSpoolConcurrentTrim(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	dropped := 0
	warn := func(string) { mu.Lock(); dropped++; mu.Unlock() }
	const per, bound = 30, 10
	var wg sync.WaitGroup
	for r := range 2 {
		sp, err := OpenSpool(dir, bound, 64<<20, warn)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := range per {
				if _, err := sp.Put(body(t, int64(r*per+i))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	ents, _ := os.ReadDir(dir)
	if len(ents) != bound || dropped != 2*per-bound {
		t.Errorf("%d files left with %d drops warned, want %d and %d", len(ents), dropped, bound, 2*per-bound)
	}
}

// TestSpoolStaleClaim: a claim left by a run that died goes back to the
// spool once stale; a fresh one is left to its run.
func TestSpoolStaleClaim(t *testing.T) {
	dir := t.TempDir()
	sp, _ := OpenSpool(dir, 10, 1<<20, nil)
	p1, _ := sp.Put(body(t, 1))
	p2, _ := sp.Put(body(t, 2))
	// Two runs took these and died (their change time, set by the
	// kernel at the rename, is what ages).
	sp.claim(filepath.Base(p1))
	sp.claim(filepath.Base(p2))
	c := newCollector(t, nil)
	n, err := sp.Flush(context.Background(), c.sender(nil).Once)
	if err != nil || n != 0 {
		t.Fatalf("fresh claims were sent: %d %v", n, err)
	}
	old := staleClaim
	staleClaim = 50 * time.Millisecond
	defer func() { staleClaim = old }()
	time.Sleep(100 * time.Millisecond)
	n, err = sp.Flush(context.Background(), c.sender(nil).Once)
	if got := c.received(); err != nil || n != 2 || len(got) != 2 {
		t.Fatalf("stale claims: %d sent, received %v, %v", n, got, err)
	}
}
