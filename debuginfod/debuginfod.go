//go:build linux

// Package debuginfod fetches ELF files by build id from debuginfod servers
// into the cache that gdb and elfutils share, so that a file one tool
// fetched serves the others.
//
// Protocol: GET URL/buildid/ID/debuginfo and URL/buildid/ID/executable
// for each URL of DEBUGINFOD_URLS (space-separated), first success wins.
// Cache: $DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client,
// else ~/.cache/debuginfod_client; a file lives at CACHE/ID/debuginfo or
// CACHE/ID/executable (directories 0700, files 0400, as elfutils makes
// them); an empty file there is elfutils' record of a failed query, which
// stands for cache_miss_s seconds (default 600). DEBUGINFOD_TIMEOUT (in
// seconds, default 90) bounds a request that makes no progress;
// DEBUGINFOD_PROGRESS asks for progress even off a terminal.
//
// Robustness: servers are not trusted. Only http and https URLs are used,
// redirects are followed at most maxRedirects times and only to http or
// https, a file is read within Options.MaxBytes (an announced length is
// checked first), its first bytes must start an ELF file (else the
// download ends there: an error page or noise is "not found", named in a
// warning), and its build id (the ELF note) must be the one asked for
// before it enters the cache; a download is written under a temporary
// name in the cache and renamed into place only when complete and
// verified (internal/safefile), so a partial or rejected file never
// appears there, and the directories made for an attempt that kept no
// file are taken away again (only those the Client made itself, checked by
// identity, never through a symlink).
package debuginfod

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/safefile"
	"stackshot/symtab"
)

// Kind is the kind of file fetched.
type Kind string

const (
	Debuginfo  Kind = "debuginfo"
	Executable Kind = "executable"
)

// Defaults.
const (
	DefaultTimeout   = 90 * time.Second // DEBUGINFOD_TIMEOUT's default
	DefaultMaxBytes  = 512 << 20        // the symbolizer's default budget
	DefaultParallel  = 4                // downloads at once
	defaultCacheMiss = 600 * time.Second
	maxRedirects     = 4
	maxBuildIDHex    = 128 // 64 bytes: the longest build id tools produce
)

// ErrNotFound means no server has the file (or none was asked): each
// answered 404, or something that is not an ELF file.
var ErrNotFound = errors.New("not found on any debuginfod server")

// ErrDeferred is Fetch's answer while the Client is paused (a capture is
// in progress) and the file is not cached: ask again later. It is the
// symbolizer's own (symtab.ErrFetchDeferred).
var ErrDeferred = symtab.ErrFetchDeferred

// ErrRejected means a server sent a file that is not what was asked for
// (not ELF, another build id, too large): it was not kept. An answer that
// is no ELF file at all is also ErrNotFound.
var ErrRejected = errors.New("rejected")

// Options configure a Client.
type Options struct {
	URLs     []string      // servers, in order
	CacheDir string        // the shared cache ("" : see CacheDir)
	Timeout  time.Duration // a request with no progress for this long fails (0: 90s)
	MaxBytes int64         // largest file accepted (0: 512 MiB)
	Parallel int           // downloads at once (0: 4)
	// Progress receives a progress line while files download ("\r"-updated
	// on a terminal); nil: none.
	Progress io.Writer
	// Terminal: Progress is a terminal (the line is rewritten in place and
	// cleared at the end); otherwise one line per file fetched.
	Terminal bool
}

// FromEnv reads the servers, cache and timeout from the environment as
// elfutils does (getenv is os.Getenv in production). Entries of
// DEBUGINFOD_URLS that are not http or https URLs are left out, each with
// a warning.
func FromEnv(getenv func(string) string) (o Options, warnings []string) {
	for _, u := range strings.Fields(getenv("DEBUGINFOD_URLS")) {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			warnings = append(warnings, fmt.Sprintf("debuginfod: %q in DEBUGINFOD_URLS is not an http or https URL (left out)", u))
			continue
		}
		o.URLs = append(o.URLs, strings.TrimRight(u, "/"))
	}
	o.CacheDir = CacheDir(getenv)
	if t := getenv("DEBUGINFOD_TIMEOUT"); t != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(t)); err == nil && n > 0 {
			o.Timeout = time.Duration(n) * time.Second
		}
	}
	return o, warnings
}

// CacheDir is the cache gdb and elfutils use: $DEBUGINFOD_CACHE_PATH, else
// $XDG_CACHE_HOME/debuginfod_client, else $HOME/.cache/debuginfod_client
// ("" when none of them is set).
func CacheDir(getenv func(string) string) string {
	if p := getenv("DEBUGINFOD_CACHE_PATH"); p != "" {
		return p
	}
	if p := getenv("XDG_CACHE_HOME"); p != "" {
		return filepath.Join(p, "debuginfod_client")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "debuginfod_client")
	}
	return ""
}

// Client fetches files by build id. It is safe for concurrent use; a file
// asked for twice at once is fetched once.
type Client struct {
	o    Options
	http *http.Client
	sem  chan struct{}

	mu       sync.Mutex
	inflight map[string]*call
	problems map[string]string // by server: the first problem met (warnings)
	down     map[string]bool   // servers not asked again
	order    []string
	paused   int   // Pause calls not yet resumed
	active   int   // downloads in progress
	done     int   // files fetched
	bytes    int64 // bytes received
	shown    bool  // a progress line is on the terminal
	lastShow time.Time

	dirMu sync.Mutex       // held while directories are made or taken away
	made  map[string]dirID // directories this Client made, by path (dirMu)
}

type call struct {
	done chan struct{}
	path string
	err  error
}

// New returns a Client.
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: o.Timeout}).DialContext,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost:   o.Parallel,
	}
	c := &Client{o: o, sem: make(chan struct{}, o.Parallel), inflight: map[string]*call{}, problems: map[string]string{}, down: map[string]bool{}, made: map[string]dirID{}}
	c.http = &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to a %s URL", req.URL.Scheme)
		}
		return nil
	}}
	return c
}

// Enabled reports whether there is any server to ask and a cache to keep
// files in.
func (c *Client) Enabled() bool { return c != nil && len(c.o.URLs) > 0 && c.o.CacheDir != "" }

// Debuginfo returns the path of the separate debug file of build id in the
// cache, fetching it first when it is not there.
func (c *Client) Debuginfo(ctx context.Context, buildID string) (string, error) {
	return c.Fetch(ctx, buildID, Debuginfo)
}

// Executable returns the path of the executable or shared library of build
// id in the cache, fetching it first when it is not there.
func (c *Client) Executable(ctx context.Context, buildID string) (string, error) {
	return c.Fetch(ctx, buildID, Executable)
}

// ValidBuildID reports whether id is a build id as hex (lower case, an
// even number of digits, at most 64 bytes): the only kind that is put into
// a URL or a cache path.
func ValidBuildID(id string) bool {
	if len(id) < 2 || len(id) > maxBuildIDHex || len(id)%2 != 0 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if b := id[i]; !('0' <= b && b <= '9' || 'a' <= b && b <= 'f') {
			return false
		}
	}
	return true
}

// Fetch returns the cached file of kind for build id, fetching it from the
// servers in order when it is not cached. ErrNotFound when no server has
// it; the context bounds the whole fetch.
func (c *Client) Fetch(ctx context.Context, buildID string, kind Kind) (string, error) {
	buildID = strings.ToLower(buildID)
	if !ValidBuildID(buildID) {
		return "", fmt.Errorf("build id %q: not a hex build id", buildID)
	}
	if kind != Debuginfo && kind != Executable {
		return "", fmt.Errorf("debuginfod: unknown file kind %q", kind)
	}
	if c.o.CacheDir == "" {
		return "", fmt.Errorf("debuginfod: no cache directory (set DEBUGINFOD_CACHE_PATH or HOME)")
	}
	dest := filepath.Join(c.o.CacheDir, buildID, string(kind))
	if p, err, ok := c.cached(dest); ok {
		return p, err
	}
	if len(c.o.URLs) == 0 {
		return "", ErrNotFound
	}
	key := buildID + "/" + string(kind)
	c.mu.Lock()
	if c.paused > 0 {
		c.mu.Unlock()
		return "", ErrDeferred
	}
	if cl := c.inflight[key]; cl != nil {
		c.mu.Unlock()
		select {
		case <-cl.done:
			return cl.path, cl.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	cl := &call{done: make(chan struct{})}
	c.inflight[key] = cl
	c.mu.Unlock()
	cl.path, cl.err = c.fetch(ctx, buildID, kind, dest)
	close(cl.done)
	// Kept in inflight: the outcome holds for the Client's life (a file
	// that is not there now is not asked for again in the same run).
	return cl.path, cl.err
}

// Pause makes Fetch answer only from the cache (ErrDeferred otherwise)
// until resume is called: nothing delays a capture in progress, not even
// by a download while no thread is stopped.
func (c *Client) Pause() (resume func()) {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	c.paused++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.paused--
			c.mu.Unlock()
		})
	}
}

// cached looks dest up in the cache: a file (ok), elfutils' recent record
// of a failed query (ok, ErrNotFound), or nothing (!ok).
func (c *Client) cached(dest string) (string, error, bool) {
	st, err := os.Stat(dest)
	if err != nil || !st.Mode().IsRegular() {
		return "", nil, false
	}
	if st.Size() > 0 {
		return dest, nil, true
	}
	if time.Since(st.ModTime()) < c.cacheMiss() {
		return "", ErrNotFound, true
	}
	return "", nil, false
}

// cacheMiss is how long a failed query stands: the cache's cache_miss_s
// file, as elfutils reads it, else 600 s.
func (c *Client) cacheMiss() time.Duration {
	b, err := os.ReadFile(filepath.Join(c.o.CacheDir, "cache_miss_s"))
	if err == nil && len(b) < 32 {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 {
			return time.Duration(n) * time.Second
		}
	}
	return defaultCacheMiss
}

// fetch asks each server in turn.
func (c *Client) fetch(ctx context.Context, buildID string, kind Kind, dest string) (string, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-c.sem }()
	if dl, ok := ctx.Deadline(); ok {
		// A server that does not answer must leave time to name what can
		// be named without it: fetches get three quarters of what is left.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(dl)*3/4)
		defer cancel()
	}
	var errs []error
	for _, server := range c.o.URLs {
		if err := ctx.Err(); err != nil {
			return "", describe(ctx, err)
		}
		if c.isDown(server) {
			continue
		}
		err := c.get(ctx, server, buildID, kind, dest)
		if err == nil {
			return dest, nil
		}
		if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrRejected) {
			c.problem(server, err)
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", ErrNotFound
	}
	var junk []error // answers that were no ELF file: not found, and why
	for _, e := range errs {
		if !errors.Is(e, ErrNotFound) {
			return "", errors.Join(errs...)
		}
		if errors.Is(e, ErrRejected) {
			junk = append(junk, e)
		}
	}
	if len(junk) > 0 {
		return "", errors.Join(junk...)
	}
	return "", ErrNotFound
}

// errDown marks the errors after which a server is not asked again in
// this run (it is down or does not answer in time): downError is one.
var errDown = errors.New("server down")

type downError struct{ err error }

func (e downError) Error() string        { return e.err.Error() }
func (e downError) Unwrap() error        { return e.err }
func (e downError) Is(target error) bool { return target == errDown }

func (c *Client) isDown(server string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down[server]
}

// problem remembers the first problem met with a server.
func (c *Client) problem(server string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(err, errDown) {
		c.down[server] = true
	}
	if _, ok := c.problems[server]; !ok {
		c.problems[server] = err.Error()
		c.order = append(c.order, server)
	}
}

// Warnings returns one line per server that failed in a way other than
// not having a file (down, garbage, wrong build id), in the order met.
func (c *Client) Warnings() []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.order {
		out = append(out, fmt.Sprintf("debuginfod server %s failed (%s; modules without debug info on disk are named from their symbol tables: check DEBUGINFOD_URLS, or pass --no-debuginfod)", s, c.problems[s]))
	}
	return out
}

// get fetches one file from one server into the cache.
func (c *Client) get(ctx context.Context, server, buildID string, kind Kind, dest string) error {
	u := server + "/buildid/" + buildID + "/" + string(kind)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "stackshot")
	resp, err := c.http.Do(req)
	if err != nil {
		return describe(ctx, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return ErrNotFound
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s: HTTP %s", kind, strings.TrimSpace(resp.Status))
	}
	if resp.ContentLength > c.o.MaxBytes {
		return fmt.Errorf("%s of %s: %d bytes, more than the %d allowed: %w", kind, buildID, resp.ContentLength, c.o.MaxBytes, ErrRejected)
	}
	// A body that makes no progress for Timeout fails: the timer closes
	// it, and every byte received sets it again.
	stall := time.AfterFunc(c.o.Timeout, func() { resp.Body.Close() })
	defer stall.Stop()
	body := bufio.NewReaderSize(stallReader{resp.Body, stall, c.o.Timeout}, elf.EI_NIDENT)
	// The first bytes tell an ELF file from an error page or noise: they
	// are looked at as soon as they arrive, before anything is made in the
	// cache, and the download ends there when they are wrong.
	head, err := body.Peek(elf.EI_NIDENT)
	switch {
	case err != nil && err != io.EOF:
		return cutShort(ctx, int64(len(head)), err)
	case len(head) == 0:
		return fmt.Errorf("%s of %s: empty answer: %w", kind, buildID, ErrRejected)
	}
	if why := notELF(head); why != "" {
		return notELFError{fmt.Sprintf("the server answered %s of %s with something that is not an ELF file with a build id (%s, %s)", kind, buildID, mediaType(resp.Header), why)}
	}
	f, err := c.create(dest)
	kept := false
	defer func() {
		if !kept {
			c.tidy(filepath.Dir(dest))
		}
	}()
	if err != nil {
		return err
	}
	c.begin()
	defer c.end()
	n, err := c.copy(ctx, f, body)
	if err != nil {
		f.Abort()
		return err
	}
	if err := f.Verify(func(r io.ReaderAt, size int64) error {
		got, err := symtab.FileBuildID(r, size)
		switch {
		case err != nil:
			return fmt.Errorf("%s of %s is not an ELF file with a build id (%v): %w", kind, buildID, err, ErrRejected)
		case got != buildID:
			return fmt.Errorf("%s of %s carries build id %s: %w", kind, buildID, got, ErrRejected)
		}
		return nil
	}); err != nil {
		f.Abort()
		return err
	}
	if err := f.Commit(); err != nil {
		return err
	}
	kept = true
	c.fetched(buildID, kind, n, server)
	return nil
}

// notELFError is an answer that is no ELF file at all (an error page from
// a proxy, a captive portal's login form, noise): the server answered,
// only not with the file. It is ErrRejected (nothing is kept, the server
// is named in a warning) and ErrNotFound (the next server is asked, and
// this one is asked again for other files).
type notELFError struct{ msg string }

func (e notELFError) Error() string { return e.msg }
func (e notELFError) Is(target error) bool {
	return target == ErrRejected || target == ErrNotFound
}

// notELF tells why the first bytes of an answer (elf.EI_NIDENT of them,
// fewer only when the answer is that short) cannot start an ELF file the
// symbolizer reads, "" when they can: the magic number, a class and a data
// encoding internal/safeelf knows (both classes, both byte orders), and
// the version debug/elf accepts.
func notELF(head []byte) string {
	switch {
	case !bytes.HasPrefix(head, []byte(elf.ELFMAG)):
		return fmt.Sprintf("starting %+q", head)
	case len(head) < elf.EI_NIDENT:
		return fmt.Sprintf("%d bytes, too few for an ELF header", len(head))
	}
	switch cl := elf.Class(head[elf.EI_CLASS]); cl {
	case elf.ELFCLASS32, elf.ELFCLASS64:
	default:
		return fmt.Sprintf("an ELF header of unknown class %d", cl)
	}
	switch d := elf.Data(head[elf.EI_DATA]); d {
	case elf.ELFDATA2LSB, elf.ELFDATA2MSB:
	default:
		return fmt.Sprintf("an ELF header of unknown data encoding %d", d)
	}
	if v := elf.Version(head[elf.EI_VERSION]); v != elf.EV_CURRENT {
		return fmt.Sprintf("an ELF header of unknown version %d", v)
	}
	return ""
}

// mediaType names, for a message, the type an answer declared (its
// Content-Type without parameters); only a well-formed type is repeated.
func mediaType(h http.Header) string {
	ct := h.Get("Content-Type")
	if ct == "" {
		return "no content type"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if mt == "" || err != nil && err != mime.ErrInvalidMediaParameter {
		return "an unreadable content type"
	}
	if len(mt) > 64 {
		mt = mt[:64] + "..."
	}
	return mt
}

// stallReader reads r, setting the stall timer t again (to d) whenever a
// byte arrives.
type stallReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (s stallReader) Read(p []byte) (int, error) {
	k, err := s.r.Read(p)
	if k > 0 {
		s.t.Reset(s.d)
	}
	return k, err
}

// copy reads the body within MaxBytes into w, counting progress.
func (c *Client) copy(ctx context.Context, w io.Writer, body io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := body.Read(buf)
		if k > 0 {
			if n+int64(k) > c.o.MaxBytes {
				return n, fmt.Errorf("answer larger than the %d bytes allowed: %w", c.o.MaxBytes, ErrRejected)
			}
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
			c.progress(int64(k))
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, cutShort(ctx, n, err)
		}
	}
}

// cutShort is the error of a body that failed after n bytes.
func cutShort(ctx context.Context, n int64, err error) error {
	if ctx.Err() != nil {
		return describe(ctx, ctx.Err())
	}
	return fmt.Errorf("download cut short after %d bytes: %v", n, err)
}

// dirID is a directory's identity: device, inode and owner.
type dirID struct {
	dev, ino uint64
	uid      uint32
}

// create makes the missing directories of dest (mkdirs) and starts
// writing dest (internal/safefile, which walks the directory path without
// following another user's symlink). Directories are made, and taken away
// (tidy), under dirMu: tidy never removes a directory another fetch of
// this Client has made or found but not yet written into.
func (c *Client) create(dest string) (*safefile.File, error) {
	c.dirMu.Lock()
	defer c.dirMu.Unlock()
	if err := c.mkdirs(filepath.Dir(dest)); err != nil {
		return nil, err
	}
	return safefile.Create(dest, safefile.ReadOnly)
}

// mkdirs makes dir and the directories above it that are missing (0700, as
// elfutils makes them) and remembers each one it made itself, by identity
// (c.dirMu held).
func (c *Client) mkdirs(dir string) error {
	var missing []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		err := os.Mkdir(p, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue // made meanwhile by someone else: used, not remembered
		}
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == os.Geteuid() {
			c.made[p] = dirID{uint64(st.Dev), uint64(st.Ino), st.Uid}
		}
	}
	return nil
}

// tidy takes away, deepest first, the empty directories from dir up that
// this Client made (mkdirs), so that an attempt that kept no file leaves
// none behind; the first directory that is not empty, or not one it made,
// ends the walk. A directory is removed only while it is still the one
// made (rmdir).
func (c *Client) tidy(dir string) {
	c.dirMu.Lock()
	defer c.dirMu.Unlock()
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		id, ok := c.made[p]
		if !ok {
			return
		}
		err := rmdir(p, id)
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return // in use: still the Client's, for a later attempt to take away
		}
		delete(c.made, p)
		if err != nil || filepath.Dir(p) == p {
			return
		}
	}
}

// errReplaced: the directory at a path is no longer the one made there.
var errReplaced = errors.New("not the directory made")

// rmdir removes the empty directory path when it is still the directory
// id names, looked at through its parent without following a symlink at
// its name: nothing else is ever removed.
func rmdir(path string, id dirID) error {
	parent, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	name := filepath.Base(path)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || (dirID{uint64(st.Dev), uint64(st.Ino), st.Uid}) != id {
		return errReplaced
	}
	return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
}

// describe turns a transport error into a short reason.
func describe(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return downError{fmt.Errorf("no answer in the time --timeout leaves: %w", context.DeadlineExceeded)}
		}
		return ctx.Err()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		err = se.Err
	}
	return downError{fmt.Errorf("unreachable: %v", err)}
}
