//go:build linux

package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"stackshot/internal/diskcache"
	"stackshot/procmaps"
	"stackshot/symtab"
)

// The child's cache. The child opens nothing and writes nothing: it asks
// its parent for an entry by key (kCacheGet; the parent opens it in the
// child's namespace and hands over a read-only descriptor, which the child
// checks as it checks any entry), and hands it the entries to write
// (kCachePut, queued in the child and sent when the parent asks, kFlush,
// as the child ends: never during a capture). The parent checks every key
// strictly (a kind symtab uses, a hex build id, a bounded printable part)
// and never takes a path from the child: an entry's name is a hash of its
// key, in the namespace the parent chose for this child.
//
// The namespace is named after who controls the bytes the child parses:
// a live target's owner (all its uids and gids, and its mount namespace
// when it is not stackshot's), or a saved capture's file (its device,
// inode, size and change times: the same bytes). An entry a compromised
// child wrote can thus only mislead later parses for the same owner, who
// already controls what its processes show, or of the same file. The
// entries stackshot writes for the processes it parses in-process live in
// the main namespace, which no child reads or writes.

// Bounds on what one child may have written: a compromised child can fill
// its namespace no faster than this per run (eviction bounds the total).
const (
	maxChildPuts = 4096
	maxPartBytes = 1024
)

// CacheNamespace is the cache namespace of a live process's child: its
// uids and gids (one each when they agree), and its mount namespace when it
// is not stackshot's (a container: its files are its own). "" when they
// cannot be read (no cache then).
func CacheNamespace(pid int) string {
	st, err := procmaps.ReadStatus(pid)
	if err != nil {
		return ""
	}
	ids := func(p string, v []int) string {
		if v[0] == v[1] && v[1] == v[2] && v[2] == v[3] {
			return p + strconv.Itoa(v[0])
		}
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = strconv.Itoa(x)
		}
		return p + strings.Join(s, "_")
	}
	name := ids("u", st.UIDs[:]) + "-" + ids("g", st.GIDs[:])
	theirs, err1 := os.Readlink(procmaps.Proc + "/" + strconv.Itoa(pid) + "/ns/mnt")
	ours, err2 := os.Readlink(procmaps.Proc + "/self/ns/mnt")
	if err1 != nil || err2 != nil {
		return ""
	}
	if theirs != ours {
		ino := strings.TrimSuffix(strings.TrimPrefix(theirs, "mnt:["), "]")
		if !isDigits(ino) {
			return ""
		}
		name += "-m" + ino
	}
	return shortNamespace(name)
}

// fileNamespace is the cache namespace of a saved capture's child: the
// file's identity, which changes when its bytes do (ctime cannot be set).
func fileNamespace(f *os.File) string {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return ""
	}
	h := sha256.Sum256(fmt.Appendf(nil, "%d %d %d %d %d", st.Dev, st.Ino, st.Size, st.Ctim.Nano(), st.Mtim.Nano()))
	return "f" + hex.EncodeToString(h[:16])
}

// shortNamespace keeps name when it is a valid namespace, else a hash of it.
func shortNamespace(name string) string {
	if diskcache.ValidNamespace(name) {
		return name
	}
	h := sha256.Sum256([]byte(name))
	return "h" + hex.EncodeToString(h[:16])
}

// openNamespace opens the child's namespace of the parent's cache ("":
// none, the child gets misses and its entries are dropped).
func (c *Child) openNamespace(name string) {
	if c.nsCache != nil {
		c.nsCache.Close()
		c.nsCache = nil
	}
	if c.cfg.Cache == nil || name == "" {
		return
	}
	c.nsCache, _ = c.cfg.Cache.Namespace(name) // (an unusable one: no cache)
}

// CacheDir is the directory of the child's namespace, "" when it has none.
func (c *Child) CacheDir() string {
	if c.nsCache == nil {
		return ""
	}
	return c.nsCache.Dir()
}

// CacheCalls is how many entries the child asked for (or was given before
// it asked: giveDebug) and handed over to be written.
func (c *Child) CacheCalls() (gets, puts int) {
	return c.calls[kCacheGet] + c.entriesGiven, c.calls[kCachePut]
}

// checkKey refuses a key the child's symbolizer would not make: a kind it
// uses, a hex build id, a bounded printable part.
func checkKey(k *diskcache.Key) error {
	switch {
	case k == nil:
		return errors.New("no key")
	case !slices.Contains(symtab.CacheKinds, k.Kind):
		return fmt.Errorf("cache kind %q refused", k.Kind)
	case len(k.BuildID) < 2 || len(k.BuildID) > 128 || !isHex(k.BuildID):
		return errors.New("cache key refused: not a build id")
	case k.Size < 0 || len(k.Part) > maxPartBytes:
		return errors.New("cache key refused: out of bounds")
	}
	for i := 0; i < len(k.Part); i++ {
		if b := k.Part[i]; b < 0x20 || b > 0x7e {
			return errors.New("cache key refused: unprintable part")
		}
	}
	return nil
}

// serveCache answers a child's kCacheGet or kCachePut.
func (c *Child) serveCache(up *upMsg) error {
	reply := func(err error) error {
		if err != nil {
			return c.down.send(c.sock, &downMsg{Kind: kReply, Err: err.Error()}, -1)
		}
		return c.down.send(c.sock, &downMsg{Kind: kReply}, -1)
	}
	if err := checkKey(up.Key); err != nil {
		return reply(err)
	}
	if c.nsCache == nil {
		return reply(errors.New("no cache"))
	}
	if up.Kind == kCacheGet {
		f, err := c.nsCache.OpenEntry(*up.Key, int64(up.Len))
		if err != nil {
			return reply(err)
		}
		defer f.Close()
		return c.down.send(c.sock, &downMsg{Kind: kReply}, int(f.Fd()))
	}
	if c.calls[kCachePut] > maxChildPuts || c.putBytes+int64(len(up.Data)) > c.nsCache.MaxPayload() {
		return reply(errors.New("cache writes over this child's share"))
	}
	c.putBytes += int64(len(up.Data))
	return reply(c.nsCache.Put(*up.Key, up.Data))
}

// flushCache has the child write what its symbolizer decoded and queued
// for the cache (Close does, once its answers are in).
func (c *Child) flushCache() {
	if c.nsCache == nil || c.dead != nil || c.sock < 0 {
		return
	}
	if c.drain(); !c.unflushed || c.dead != nil {
		return // (flushed after the last request: ResolveThen)
	}
	// (Bounded as a start is, the bound growing with the machine's load:
	// a fixed 10 s cut the writes short at a load of 200 on 2 CPUs, and
	// the next run built those entries again.)
	killAt := c.killAt()
	if soon := startDeadline(c.cfg); soon.Before(killAt) {
		killAt = soon
	}
	c.roundTrip(&downMsg{Kind: kFlush}, killAt)
}

// childCache is the child's side: the cache its symbolizer uses (nil: it
// has none).
var childCache *cacheClient

type cacheClient struct {
	c       *client
	mu      sync.Mutex
	pending map[diskcache.Key][]byte // entries to hand over at kFlush, the last of each key
	bytes   int64
	given   map[diskcache.Key]int // entries the parent gave before they were asked for (give.go)
}

// keepGiven keeps an entry the parent gave, unless maxKeptEntries are
// kept.
func (cc *cacheClient) keepGiven(k diskcache.Key, fd int) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if _, ok := cc.given[k]; ok || len(cc.given) >= maxKeptEntries {
		return false
	}
	if cc.given == nil {
		cc.given = map[diskcache.Key]int{}
	}
	cc.given[k] = fd
	return true
}

// Get implements symtab.Cache: the parent opens the entry (or gave it
// already), the child checks it (diskcache.ReadEntry).
func (cc *cacheClient) Get(k diskcache.Key, max int64) ([]byte, bool) {
	cc.mu.Lock()
	b, ok := cc.pending[k]
	fd, given := cc.given[k]
	delete(cc.given, k)
	cc.mu.Unlock()
	if ok {
		if given {
			unix.Close(fd)
		}
		return b, int64(len(b)) <= max
	}
	if !given {
		var err error
		if _, fd, err = cc.c.call(&upMsg{Kind: kCacheGet, Key: &k, Len: int(min(max, 1<<40))}); err != nil || fd < 0 {
			return nil, false
		}
	}
	f := os.NewFile(uintptr(fd), "cache entry")
	defer f.Close()
	b, err := diskcache.ReadEntry(f, k, max)
	return b, err == nil
}

// Put implements symtab.Cache: queued until the parent asks (kFlush),
// within the share a child may write.
func (cc *cacheClient) Put(k diskcache.Key, payload []byte) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	old, had := cc.pending[k]
	if !had && len(cc.pending) >= maxChildPuts || cc.bytes-int64(len(old))+int64(len(payload)) > maxUpResult/2 {
		return errors.New("cache writes over this child's share")
	}
	if cc.pending == nil {
		cc.pending = map[diskcache.Key][]byte{}
	}
	cc.pending[k] = payload
	cc.bytes += int64(len(payload) - len(old))
	return nil
}

// flush hands the queued entries to the parent, to be written.
func (cc *cacheClient) flush() {
	cc.mu.Lock()
	pending := cc.pending
	cc.pending, cc.bytes = nil, 0
	cc.mu.Unlock()
	for k, b := range pending {
		cc.c.call(&upMsg{Kind: kCachePut, Key: &k, Data: b})
	}
}

// cacheProbe is the test hook "cacheget:KEY" or "cacheput:KEY" (KEY a
// JSON diskcache.Key): the child asks for that entry, or to write it, and
// answers "ok" (a hit, or written) or the parent's refusal.
func cacheProbe(hook string) string {
	op, js, _ := strings.Cut(hook, ":")
	var k diskcache.Key
	if childCache == nil || json.Unmarshal([]byte(js), &k) != nil {
		return ""
	}
	switch op {
	case "cacheget":
		_, fd, err := childCache.c.call(&upMsg{Kind: kCacheGet, Key: &k, Len: 1 << 20})
		if err != nil {
			return err.Error()
		}
		if fd >= 0 {
			unix.Close(fd)
		}
		return "ok"
	case "cacheput":
		if _, _, err := childCache.c.call(&upMsg{Kind: kCachePut, Key: &k, Data: []byte("probe")}); err != nil {
			return err.Error()
		}
		return "ok"
	}
	return ""
}
