//go:build linux

package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"stackshot/internal/diskcache"
	"stackshot/ptrace"
)

// entries lists the cache entries in dir (file name -> inode): a rewritten
// entry gets a new inode (a temporary file renamed over it).
func entries(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".c") {
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(dir, e.Name()), &st); err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = st.Ino
		}
	}
	return out
}

// boxedDump dumps tg's process through a new child using cache, as a
// command does (the child's entries handed over at Close), and returns its
// chains and the child's cache calls.
func boxedDump(t *testing.T, cache *diskcache.Cache, pid int) (map[string]string, string, int, int) {
	t.Helper()
	tgt, err := TargetOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	cfg := liveConfig()
	cfg.Cache = cache
	c, err := Start(cfg, tgt)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ptrace.Capture(pid, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	rp, err := c.Resolve(p)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	dir := c.CacheDir()
	c.Close() // (the child's entries are written now)
	gets, puts := c.CacheCalls()
	return chains(rp), dir, gets, puts
}

// A dump of another user's process through the child fills a namespace of
// the cache of its own (named after the target's owner) and nothing else;
// the second dump is served from it (entries asked for, none written, none
// rewritten) with the frames of a dump without a cache; damaged entries and
// entries of other namespaces planted under the same names are rebuilt.
func TestCacheChildNamespace(t *testing.T) {
	tg := startAsOther(t)
	cache, err := diskcache.Open(filepath.Join(t.TempDir(), "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	want, _, _, _ := boxedDump(t, nil, tg.PID)
	if len(want) < 7 {
		t.Fatalf("%d threads", len(want))
	}
	same := func(stage string, got map[string]string) {
		t.Helper()
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: thread %s:\n got  %s\n want %s", stage, name, got[name], w)
			}
		}
	}
	got, dir, _, puts := boxedDump(t, cache, tg.PID)
	same("cold", got)
	wantDir := diskcache.NamespaceDir(cache.Dir(), "u1000-g1000")
	if dir != wantDir {
		t.Fatalf("child's namespace %s, want %s", dir, wantDir)
	}
	cold := entries(t, dir)
	t.Logf("cold: %d entries, %d handed over", len(cold), puts)
	if len(cold) == 0 || puts < len(cold) {
		t.Fatalf("cold run: %d entries written, %d handed over", len(cold), puts)
	}
	if main := entries(t, cache.Dir()); len(main) != 0 {
		t.Fatalf("the child's entries reached the main namespace: %v", main)
	}

	got, _, gets, puts := boxedDump(t, cache, tg.PID)
	same("warm", got)
	t.Logf("warm: %d asked for, %d handed over", gets, puts)
	if gets == 0 || puts != 0 {
		t.Fatalf("warm run: %d entries asked for, %d handed over (want some, none)", gets, puts)
	}
	if warm := entries(t, dir); len(warm) != len(cold) {
		t.Fatalf("warm run: entries %v, cold %v", warm, cold)
	} else {
		for n, ino := range cold {
			if warm[n] != ino {
				t.Errorf("warm run rewrote %s", n)
			}
		}
	}

	// Damaged entries: each a different way. Then entries of other
	// namespaces moved in under the same names (another owner's, the main
	// namespace's): their keys are not theirs, or they are not ours.
	i := 0
	for n := range cold {
		p := filepath.Join(dir, n)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0:
			b[len(b)/2] ^= 0xff
		case 1:
			b = b[:len(b)-1]
		case 2:
			b = append(b, 0)
		}
		i++
		os.Remove(p)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, _, _, puts = boxedDump(t, cache, tg.PID)
	same("damaged", got)
	if puts == 0 {
		t.Fatal("damaged entries were not rebuilt")
	}
	if again, _, gets, puts := boxedDump(t, cache, tg.PID); puts != 0 || gets == 0 {
		t.Fatalf("after the rebuild: %d asked for, %d handed over", gets, puts)
	} else {
		same("rebuilt", again)
	}

	// Foreign entries: each file holds another key's entry (moved from
	// another namespace or name), or belongs to another user (the
	// target's: a child's own uid never owns one).
	names := make([]string, 0, len(cold))
	for n := range entries(t, dir) {
		names = append(names, n)
	}
	first := mustRead(t, filepath.Join(dir, names[0]))
	for i, n := range names {
		src := first
		if i+1 < len(names) {
			src = mustRead(t, filepath.Join(dir, names[i+1]))
		}
		p := filepath.Join(dir, n)
		os.Remove(p)
		if err := os.WriteFile(p, src, 0o600); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			os.Chown(p, otherUser, otherUser)
		}
	}
	got, _, _, _ = boxedDump(t, cache, tg.PID)
	same("foreign", got)
	// An entry is read when a run needs it (a decompressed section only
	// when the index was cached): within a few runs every foreign one was
	// needed, found not to be the child's, and rebuilt.
	for i := 0; ; i++ {
		got, _, _, puts := boxedDump(t, cache, tg.PID)
		same("after foreign", got)
		if puts == 0 {
			break
		}
		if i == 3 {
			t.Fatalf("still rebuilding after %d runs", i+1)
		}
	}
	for n := range entries(t, dir) {
		if err := validEntry(filepath.Join(dir, n)); err != nil {
			t.Errorf("entry %s: %v", n, err)
		}
	}
}

// validEntry checks that the entry at p is one of stackshot's user, holds
// the key its name is the hash of, and is intact.
func validEntry(p string) error {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owner %d (%v)", st.Uid, err)
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) < 24 {
		return fmt.Errorf("short (%v)", err)
	}
	keyLen := int(b[12]) | int(b[13])<<8
	if 24+keyLen > len(b) {
		return errors.New("key past the end")
	}
	var f [7]string
	lines := strings.SplitN(string(b[24:24+keyLen]), "\n", 8)
	for i := range f {
		if i >= len(lines) {
			return errors.New("short key")
		}
		if f[i], err = strconv.Unquote(lines[i]); err != nil {
			return err
		}
	}
	num := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	unum := func(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }
	k := diskcache.Key{Kind: f[0], BuildID: f[1], Size: num(f[2]), Dev: unum(f[3]), Ino: unum(f[4]), Ctime: num(f[5]), Part: f[6]}
	if diskcache.EntryName(k) != filepath.Base(p) {
		return errors.New("holds another key's entry")
	}
	_, err = diskcache.Decode(k, b)
	return err
}

// A child asks only for keys its symbolizer makes, in its own namespace:
// a path-like or malformed key is refused by the parent, an entry of the
// same key in another namespace (the main one, another owner's) is never
// handed over, and what it writes lands in its namespace only.
func TestCacheChildConfined(t *testing.T) {
	tg := startAsOther(t)
	cache, err := diskcache.Open(filepath.Join(t.TempDir(), "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	k := diskcache.Key{Kind: "symbols", BuildID: "0123abcd", Size: 10, Dev: 1, Ino: 2, Ctime: 3, Part: "v1 debug=none alt=none"}
	other, err := cache.Namespace("u1001-g1001")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*diskcache.Cache{cache, other} {
		if err := c.Put(k, []byte("not for the child")); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string][]byte{}
	for _, d := range []string{cache.Dir(), other.Dir()} {
		b, err := os.ReadFile(filepath.Join(d, diskcache.EntryName(k)))
		if err != nil {
			t.Fatal(err)
		}
		before[d] = b
	}
	tgt, _ := TargetOf(tg.PID)
	cfg := liveConfig()
	cfg.Cache = cache
	c := startChild(t, cfg, tgt)
	probe := func(op string, k diskcache.Key) string {
		t.Helper()
		js, _ := json.Marshal(k)
		out, err := c.Probe(op + ":" + string(js))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := probe("cacheget", k); got == "ok" {
		t.Fatal("the child got an entry of another namespace")
	}
	for _, bad := range []diskcache.Key{
		{Kind: "../ns-u1001-g1001/x", BuildID: "0123abcd"},
		{Kind: "/etc/passwd", BuildID: "0123abcd"},
		{Kind: "symbols", BuildID: "../../etc/passwd"},
		{Kind: "symbols", BuildID: "ns-u1001-g1001"},
		{Kind: "symbols", BuildID: ""},
		{Kind: "symbols", BuildID: "0123abcd", Part: "a\nb"},
		{Kind: "symbols", BuildID: "0123abcd", Part: strings.Repeat("a", 2000)},
		{Kind: "symbols", BuildID: "0123abcd", Size: -1},
	} {
		for _, op := range []string{"cacheget", "cacheput"} {
			if got := probe(op, bad); got == "ok" || !strings.Contains(got, "refused") {
				t.Errorf("%s %+v: %q, want refused", op, bad, got)
			}
		}
	}
	if got := probe("cacheput", k); got != "ok" {
		t.Fatalf("put in its own namespace: %q", got)
	}
	if got := probe("cacheget", k); got != "ok" {
		t.Fatalf("get from its own namespace: %q", got)
	}
	own := diskcache.NamespaceDir(cache.Dir(), "u1000-g1000")
	if b, err := diskcache.Decode(k, mustRead(t, filepath.Join(own, diskcache.EntryName(k)))); err != nil || string(b) != "probe" {
		t.Fatalf("the child's entry in its namespace: %q, %v", b, err)
	}
	for d, b := range before {
		if now := mustRead(t, filepath.Join(d, diskcache.EntryName(k))); !bytes.Equal(now, b) {
			t.Errorf("the entry in %s changed", d)
		}
	}
	if n := len(entries(t, cache.Dir())) + len(entries(t, other.Dir())); n != 2 {
		t.Errorf("%d entries outside the child's namespace, want the 2 planted", n)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
