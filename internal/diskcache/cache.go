//go:build linux

package diskcache

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/safefile"
)

// DefaultMaxBytes bounds the cache's total size; the oldest entries (by
// last use) are removed past it.
const DefaultMaxBytes = 256 << 20

// Environment variables read by Default.
const (
	EnvDir     = "STACKSHOT_CACHE_DIR" // the cache directory, instead of the default
	EnvNoCache = "STACKSHOT_NO_CACHE"  // "1": no cache at all, as --no-cache
)

const (
	entrySuffix = ".c"
	maxEntries  = 100000           // directory entries looked at by one eviction
	staleTemp   = 10 * time.Minute // a temporary file older than this was abandoned
)

// Cache is an open cache directory. Its methods are safe for concurrent
// use; a nil *Cache is a cache that holds nothing.
type Cache struct {
	dir      *os.File
	maxBytes int64
	// root is the main namespace, whose directory holds the others
	// (namespace.go): its eviction and its size bound cover them all.
	// nil: c is the main namespace.
	root    *Cache
	evictMu sync.Mutex // serializes evictions
	mu      sync.Mutex // guards evicted and written
	evicted bool       // once in this process
	written int64      // bytes put since the last eviction
}

// DefaultDir is where the cache lives: $STACKSHOT_CACHE_DIR, else root's
// /var/cache/stackshot, else $XDG_CACHE_HOME/stackshot, else
// ~/.cache/stackshot. "" when none can be named (no home).
func DefaultDir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/cache/stackshot"
	}
	if x := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "stackshot")
	}
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		return filepath.Join(h, ".cache", "stackshot")
	}
	return ""
}

// Default opens the cache where DefaultDir says, creating it; nil and no
// error when STACKSHOT_NO_CACHE=1 or when no directory can be named. An
// error means the directory is not safe to use (the caller warns once and
// goes on without a cache).
func Default() (*Cache, error) {
	if os.Getenv(EnvNoCache) == "1" {
		return nil, nil
	}
	d := DefaultDir()
	if d == "" {
		return nil, nil
	}
	return Open(d, DefaultMaxBytes)
}

var (
	sharedMu sync.Mutex
	shared   = map[string]*Cache{}
)

// Shared is Default opened once per process (for each directory): the
// symbolizer and the sandboxed children's namespaces share it, and its
// error is said once, through warn, unless quiet. off (--no-cache): nil.
func Shared(off, quiet bool, warn func(string)) *Cache {
	if off {
		return nil
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	d := DefaultDir()
	if c, ok := shared[d]; ok {
		return c
	}
	c, err := Default()
	if err != nil && !quiet {
		warn(err.Error())
	}
	shared[d] = c
	return c
}

// Open opens (creating it, mode 0700, with its parent when that is missing)
// the cache directory dir, holding at most maxBytes. The directory must be
// a real directory (not a symlink), owned by stackshot's effective user,
// writable by no one else; otherwise it is not used.
func Open(dir string, maxBytes int64) (*Cache, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if err := unix.Mkdir(dir, 0o700); errors.Is(err, unix.ENOENT) {
		// ~/.cache itself may be missing (XDG: create it 0700).
		unix.Mkdir(filepath.Dir(dir), 0o700)
		unix.Mkdir(dir, 0o700)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("not using the cache %s (it is not a directory, or is a symbolic link; remove it or set %s)", dir, EnvDir)
		}
		return nil, fmt.Errorf("not using the cache %s (%v; create it mode 0700 or set %s, or give --no-cache)", dir, err, EnvDir)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("not using the cache %s (%v)", dir, err)
	}
	switch {
	case int(st.Uid) != os.Geteuid():
		unix.Close(fd)
		return nil, fmt.Errorf("not using the cache %s (it belongs to uid %d, not to uid %d that stackshot runs as; remove it or set %s)", dir, st.Uid, os.Geteuid(), EnvDir)
	case st.Mode&0o022 != 0:
		unix.Close(fd)
		return nil, fmt.Errorf("not using the cache %s (other users may write to it, mode %04o; chmod 700 it)", dir, st.Mode&0o7777)
	}
	return &Cache{dir: os.NewFile(uintptr(fd), dir), maxBytes: maxBytes}, nil
}

// Close releases the directory.
func (c *Cache) Close() error {
	if c == nil {
		return nil
	}
	return c.dir.Close()
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir.Name() }

// EntryName is the file name of k's entry in the directory.
func EntryName(k Key) string {
	h := sha256.Sum256(k.encode())
	return hex.EncodeToString(h[:20]) + entrySuffix
}

// MaxPayload is the largest payload one entry may hold.
func (c *Cache) MaxPayload() int64 { return c.maxBytes / 2 }

// Get returns the payload stored under k, at most max bytes, or false.
// An entry that is not a regular file of ours, too large, truncated,
// corrupt, or of another key or format is removed and reported as a miss.
func (c *Cache) Get(k Key, max int64) ([]byte, bool) {
	if c == nil || max < 0 {
		return nil, false
	}
	f, err := c.OpenEntry(k, max)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	payload, err := ReadEntry(f, k, max)
	if err != nil {
		unix.Unlinkat(int(c.dir.Fd()), EntryName(k), 0)
		return nil, false
	}
	return payload, true
}

// errMiss is OpenEntry's answer when there is no usable entry.
var errMiss = errors.New("no cache entry")

// OpenEntry opens k's entry, read-only, for a reader that checks it itself
// (ReadEntry): a regular file of ours, of a size an entry of at most max
// payload bytes may have, else it is removed and the answer is a miss. Its
// last use is noted (for eviction). Get is OpenEntry then ReadEntry; a
// sandboxed parser reads the descriptor its parent opened this way.
func (c *Cache) OpenEntry(k Key, max int64) (*os.File, error) {
	if c == nil || max < 0 {
		return nil, errMiss
	}
	name := EntryName(k)
	dfd := int(c.dir.Fd())
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			unix.Unlinkat(dfd, name, 0) // a planted symlink: never followed, removed
		}
		return nil, errMiss
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		unix.Close(fd)
		return nil, errMiss
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 || st.Size < headerBytes+crcBytes || st.Size > entryLimit(min(max, c.MaxPayload())) {
		unix.Close(fd)
		unix.Unlinkat(dfd, name, 0)
		return nil, errMiss
	}
	// Last use, for oldest-first eviction.
	now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	unix.UtimesNanoAt(dfd, name, now, unix.AT_SYMLINK_NOFOLLOW)
	return os.NewFile(uintptr(fd), name), nil
}

// entryLimit is the largest entry of a payload of at most max bytes.
func entryLimit(max int64) int64 { return headerBytes + maxKeyBytes + crcBytes + max }

// ReadEntry reads the entry f (as OpenEntry opened it) and returns its
// payload under k, at most max bytes: its size is bounded before anything
// is allocated, and Decode checks the rest. Nothing of f is trusted.
func ReadEntry(f *os.File, k Key, max int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || max < 0 || st.Size < headerBytes+crcBytes || st.Size > entryLimit(max) {
		return nil, invalid("not an entry of a bounded size")
	}
	b := make([]byte, st.Size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, st.Size), b); err != nil {
		return nil, invalid("short read")
	}
	payload, err := Decode(k, b)
	if err != nil {
		return nil, err
	}
	if int64(len(payload)) > max {
		return nil, invalid("payload over the bound")
	}
	return payload, nil
}

// Put stores payload under k, atomically (a temporary file renamed over
// the entry, mode 0600), then removes the oldest entries past the size
// bound. A payload larger than half the bound is not stored.
func (c *Cache) Put(k Key, payload []byte) error {
	return c.PutParts(k, payload)
}

// PutParts is Put of the payload made of parts one after the other,
// written as they are (a pack of 16 MB need not be copied into one
// buffer first).
func (c *Cache) PutParts(k Key, parts ...[]byte) error {
	if c == nil {
		return nil
	}
	size := int64(0)
	for _, p := range parts {
		size += int64(len(p))
	}
	if size > c.MaxPayload() {
		return fmt.Errorf("cache entry of %d bytes is over the cap of %d", size, c.MaxPayload())
	}
	key := k.encode()
	if len(key) > maxKeyBytes {
		return fmt.Errorf("cache key of %d bytes is too long", len(key))
	}
	f, err := safefile.CreateAt(c.dir, EntryName(k), safefile.Private)
	if err != nil {
		return err
	}
	// The checksum on read, not fsync, is what guards against a torn
	// write: a cache needs no durability.
	f.SkipSync()
	hdr := make([]byte, 0, headerBytes+len(key))
	hdr = append(hdr, magic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, FormatVersion)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(key)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(size))
	hdr = append(hdr, key...)
	crc := crc32.ChecksumIEEE(hdr)
	for _, p := range parts {
		crc = crc32.Update(crc, crc32.IEEETable, p)
	}
	tail := binary.LittleEndian.AppendUint32(nil, crc)
	// Small parts are gathered, a large one written as it is (bufio).
	w := bufio.NewWriterSize(f, 256<<10)
	for _, p := range append(append([][]byte{hdr}, parts...), tail) {
		if _, err := w.Write(p); err != nil {
			f.Abort()
			return fmt.Errorf("writing the cache entry (%v; check the free space)", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Abort()
		return fmt.Errorf("writing the cache entry (%v; check the free space)", err)
	}
	// The old entry (a pack rewritten with more units) is removed first:
	// ext4 writes a file's data back before renaming it over another
	// (auto_da_alloc, its guard for programs that skip fsync), 2-4 ms for
	// a 2.8 MB entry, while a rename to a free name is not held. Between
	// the two a reader misses, as on a cold run; it never sees part of an
	// entry. (Unlinking a name never follows a symlink.)
	unix.Unlinkat(int(c.dir.Fd()), EntryName(k), 0)
	if err := f.Commit(); err != nil {
		return err
	}
	// The directory is scanned on this process's first write, then each
	// time it has written an eighth of the bound: a run adds a handful of
	// entries, and a scan per entry would cost more than the entry.
	r := c.main()
	r.mu.Lock()
	r.written += int64(len(hdr)) + size + int64(len(tail))
	scan := !r.evicted || r.written > r.maxBytes/8
	if scan {
		r.evicted, r.written = true, 0
	}
	r.mu.Unlock()
	if scan {
		r.evict()
	}
	return nil
}

// main is the main namespace of c (c itself, or the one it lies in).
func (c *Cache) main() *Cache {
	if c.root != nil {
		return c.root
	}
	return c
}

// evict removes the oldest entries (by last use), of every namespace,
// until the cache holds at most maxBytes, temporary files abandoned by a
// writer that died, and namespaces left empty for a while.
func (c *Cache) evict() {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	var ents []ent
	var total int64
	budget := maxEntries
	var dirs []*os.File // the namespaces scanned, open until the removals are done
	defer func() {
		for _, d := range dirs {
			d.Close()
		}
	}()
	dfd := int(c.dir.Fd())
	names := scanDir(c.dir, &budget, &ents, &total)
	for _, n := range names {
		if !strings.HasPrefix(n, nsPrefix) || budget <= 0 {
			continue
		}
		nfd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		d := os.NewFile(uintptr(nfd), n)
		dirs = append(dirs, d)
		if len(scanDir(d, &budget, &ents, &total)) == 0 {
			// Empty, and not just made by a writer about to fill it.
			var st unix.Stat_t
			if unix.Fstat(nfd, &st) == nil && time.Since(time.Unix(st.Mtim.Unix())) > staleTemp {
				unix.Unlinkat(dfd, n, unix.AT_REMOVEDIR)
			}
		}
	}
	if total <= c.maxBytes {
		return
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].mtime < ents[j].mtime })
	for _, e := range ents {
		if total <= c.maxBytes {
			break
		}
		if unix.Unlinkat(int(e.dir.Fd()), e.name, 0) == nil {
			total -= e.size
		}
	}
}

// ent is an entry eviction may remove.
type ent struct {
	dir   *os.File
	name  string
	size  int64
	mtime int64
}

// scanDir adds d's entries to ents and their sizes to total, removes its
// abandoned temporary files, and returns the names it read (at most
// *budget, which it lowers).
func scanDir(d *os.File, budget *int, ents *[]ent, total *int64) []string {
	dfd := int(d.Fd())
	rfd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	r := os.NewFile(uintptr(rfd), d.Name())
	names, _ := r.Readdirnames(*budget)
	r.Close()
	*budget -= len(names)
	now := time.Now()
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if strings.HasPrefix(n, ".") && strings.Contains(n, ".stackshot-") {
			if now.Sub(time.Unix(st.Mtim.Unix())) > staleTemp {
				unix.Unlinkat(dfd, n, 0)
			}
			continue
		}
		if !strings.HasSuffix(n, entrySuffix) || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		*ents = append(*ents, ent{d, n, st.Size, st.Mtim.Nano()})
		*total += st.Size
	}
	return names
}
