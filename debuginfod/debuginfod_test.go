//go:build linux

package debuginfod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// counting is an httptest server that counts its requests and answers
// with handle.
func counting(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func newClient(cache string, urls ...string) *Client {
	return New(Options{URLs: urls, CacheDir: cache, Timeout: 10 * time.Second})
}

// The real elfutils server: the debug file arrives in the shared layout,
// and debuginfod-find then finds it offline (its server down), from the
// cache stackshot filled.
func TestRealServerFetchesIntoSharedCache(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	srv := testutil.StartDebuginfod(t, []string{sp.Debug, sp.Exe}, "/buildid/"+sp.BuildID+"/debuginfo", "/buildid/"+sp.BuildID+"/executable")
	cache := filepath.Join(t.TempDir(), "cache")
	c := newClient(cache, srv.URL)
	p, err := c.Debuginfo(context.Background(), sp.BuildID)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, sp.BuildID, "debuginfo"); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	got, _ := os.ReadFile(p)
	want, _ := os.ReadFile(sp.Debug)
	if string(got) != string(want) {
		t.Errorf("cached debuginfo (%d bytes) differs from the served file (%d bytes)", len(got), len(want))
	}
	if _, err := c.Executable(context.Background(), sp.BuildID); err != nil {
		t.Fatal(err)
	}
	files := testutil.CacheFiles(t, cache)
	wantFiles := []string{sp.BuildID + "/debuginfo 0400", sp.BuildID + "/executable 0400"}
	if !slices.Equal(files, wantFiles) {
		t.Errorf("cache holds %v, want %v", files, wantFiles)
	}
	if st, _ := os.Stat(filepath.Join(cache, sp.BuildID)); st == nil || st.Mode().Perm() != 0o700 {
		t.Errorf("build-id directory mode %v, want 0700 (as elfutils makes it)", st)
	}

	find := testutil.Need(t, "debuginfod-find")
	for _, kind := range []string{"debuginfo", "executable"} {
		cmd := exec.Command(find, kind, sp.BuildID)
		cmd.Env = append(os.Environ(), "DEBUGINFOD_URLS="+testutil.DeadURL(t), "DEBUGINFOD_CACHE_PATH="+cache)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("debuginfod-find %s %s (server down, file cached by stackshot): %v", kind, sp.BuildID, err)
		}
		if got := strings.TrimSpace(string(out)); got != filepath.Join(cache, sp.BuildID, kind) {
			t.Errorf("debuginfod-find %s: %q", kind, got)
		}
	}
}

// A file debuginfod-find fetched serves stackshot without a download.
func TestFileFetchedByElfutilsIsUsed(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	srv := testutil.StartDebuginfod(t, []string{sp.Debug}, "/buildid/"+sp.BuildID+"/debuginfo")
	cache := filepath.Join(t.TempDir(), "cache")
	cmd := exec.Command(testutil.Need(t, "debuginfod-find"), "debuginfo", sp.BuildID)
	cmd.Env = append(os.Environ(), "DEBUGINFOD_URLS="+srv.URL, "DEBUGINFOD_CACHE_PATH="+cache)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("debuginfod-find: %v\n%s", err, out)
	}
	other, n := counting(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	p, err := newClient(cache, other.URL).Debuginfo(context.Background(), sp.BuildID)
	if err != nil || p != filepath.Join(cache, sp.BuildID, "debuginfo") {
		t.Fatalf("got %q, %v", p, err)
	}
	if n.Load() != 0 {
		t.Errorf("%d requests for a cached file", n.Load())
	}
}

// twoDebugFiles builds two targets split from their debug files, and
// returns them with their debug files' bytes (other's is a file of the
// wrong build id for sp).
func twoDebugFiles(t *testing.T) (sp, other testutil.Split, debug, otherDebug []byte) {
	sp = testutil.SplitTarget(t, "blocked", false)
	other = testutil.SplitTarget(t, "hot", false)
	debug, _ = os.ReadFile(sp.Debug)
	otherDebug, _ = os.ReadFile(other.Debug)
	return sp, other, debug, otherDebug
}

// Answers that are not the file asked for never enter the cache.
func TestRejectedAnswers(t *testing.T) {
	sp, other, debug, otherDebug := twoDebugFiles(t)
	cases := []struct {
		name    string
		handle  func(w http.ResponseWriter, r *http.Request)
		max     int64
		wantErr string
	}{
		{"garbage", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, strings.Repeat("this is not an ELF file\n", 100))
		}, 0, "is not an ELF file with a build id"},
		{"wrong build id", func(w http.ResponseWriter, r *http.Request) {
			w.Write(otherDebug)
		}, 0, "carries build id " + other.BuildID},
		{"truncated ELF", func(w http.ResponseWriter, r *http.Request) {
			w.Write(debug[:len(debug)/3])
		}, 0, "not an ELF file with a build id"},
		{"cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(debug)))
			w.Write(debug[:len(debug)/2])
		}, 0, "download cut short"},
		{"too large, announced", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(debug)))
			w.Write(debug)
		}, int64(len(debug) - 1), "more than the"},
		{"too large, streamed", func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush() // chunked: no length announced
			w.Write(debug)
		}, int64(len(debug) - 1), "larger than the"},
		{"empty", func(w http.ResponseWriter, r *http.Request) {}, 0, "empty answer"},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, 0, "HTTP 500"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := counting(t, tc.handle)
			cache := filepath.Join(t.TempDir(), "cache")
			c := New(Options{URLs: []string{srv.URL}, CacheDir: cache, MaxBytes: tc.max, Timeout: 10 * time.Second})
			p, err := c.Debuginfo(context.Background(), sp.BuildID)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %q, %v; want an error with %q", p, err, tc.wantErr)
			}
			if n.Load() != 1 {
				t.Errorf("%d requests, want 1", n.Load())
			}
			if files := testutil.CacheFiles(t, cache); len(files) != 0 || testutil.HasTemp(cache) {
				t.Errorf("the cache holds %v after a rejected answer", files)
			}
			w := c.Warnings()
			if len(w) != 1 || !strings.Contains(w[0], srv.URL) || !strings.Contains(w[0], tc.wantErr) {
				t.Errorf("warnings %q", w)
			}
			// Asked again in the same run: the outcome stands, no request.
			c.Debuginfo(context.Background(), sp.BuildID)
			if n.Load() != 1 {
				t.Errorf("%d requests after asking twice, want 1", n.Load())
			}
		})
	}
}

// A server that is down: one warning, quickly, and it is not asked again;
// the next server is.
func TestServerDown(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	debug, _ := os.ReadFile(sp.Debug)
	good, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/buildid/"+sp.BuildID+"/debuginfo" {
			http.NotFound(w, r)
			return
		}
		w.Write(debug)
	})
	dead := testutil.DeadURL(t)
	cache := filepath.Join(t.TempDir(), "cache")
	c := newClient(cache, dead, good.URL)
	if _, err := c.Debuginfo(context.Background(), sp.BuildID); err != nil {
		t.Fatalf("the second server has it: %v", err)
	}
	if _, err := c.Executable(context.Background(), sp.BuildID); !errors.Is(err, ErrNotFound) {
		t.Errorf("executable: %v, want not found", err)
	}
	w := c.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], dead) || !strings.Contains(w[0], "connection refused") {
		t.Errorf("warnings %q", w)
	}
	if n.Load() != 2 {
		t.Errorf("good server asked %d times, want 2", n.Load())
	}
}

// A server that accepts and never answers costs at most three quarters of
// the time the context leaves, then is given up for the run.
func TestServerSilent(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	srv, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	c := newClient(filepath.Join(t.TempDir(), "cache"), srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.Debuginfo(ctx, "aabbccdd")
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("err %v", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the fetch used the whole context (%v), leaving no time to name frames", err)
	}
	c.Debuginfo(ctx, "aabbccee")
	if n.Load() != 1 {
		t.Errorf("silent server asked %d times, want 1", n.Load())
	}
}

// Redirects are followed a few times, only to http(s).
func TestRedirects(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	debug, _ := os.ReadFile(sp.Debug)
	var srv *httptest.Server
	srv, _ = counting(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/file/"):
			w.Write(debug)
		case strings.HasPrefix(r.URL.Path, "/loop/"):
			http.Redirect(w, r, "/loop/"+r.URL.Path, http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/away/"):
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		default:
			http.Redirect(w, r, srv.URL+"/file"+r.URL.Path, http.StatusMovedPermanently)
		}
	})
	p, err := newClient(filepath.Join(t.TempDir(), "c1"), srv.URL).Debuginfo(context.Background(), sp.BuildID)
	if err != nil || !strings.HasSuffix(p, "/debuginfo") {
		t.Fatalf("redirected once: %q, %v", p, err)
	}
	for _, base := range []string{"/loop", "/away"} {
		cache := filepath.Join(t.TempDir(), "c2")
		_, err := newClient(cache, srv.URL+base).Debuginfo(context.Background(), sp.BuildID)
		if err == nil || len(testutil.CacheFiles(t, cache)) != 0 {
			t.Errorf("%s: %v, cache %v", base, err, testutil.CacheFiles(t, cache))
		}
	}
}

// A build id from the target's memory goes into a path and a URL only
// when it is hex.
func TestBuildIDValidated(t *testing.T) {
	srv, n := counting(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	c := newClient(filepath.Join(t.TempDir(), "cache"), srv.URL)
	for _, id := range []string{"", "a", "../../etc/passwd", "abc", "zz", "aa/bb", strings.Repeat("ab", 65), "aa\x00bb"} {
		if _, err := c.Debuginfo(context.Background(), id); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("build id %q: %v", id, err)
		}
	}
	if n.Load() != 0 {
		t.Errorf("%d requests for invalid build ids", n.Load())
	}
	if _, err := c.Debuginfo(context.Background(), "AABB"); !errors.Is(err, ErrNotFound) {
		t.Errorf("upper-case hex: %v", err)
	}
}

// elfutils' record of a failed query stands for cache_miss_s.
func TestNegativeCacheEntry(t *testing.T) {
	srv, n := counting(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	cache := t.TempDir()
	os.MkdirAll(filepath.Join(cache, "aabb"), 0o700)
	os.WriteFile(filepath.Join(cache, "aabb", "debuginfo"), nil, 0o400)
	c := newClient(cache, srv.URL)
	if _, err := c.Debuginfo(context.Background(), "aabb"); !errors.Is(err, ErrNotFound) || n.Load() != 0 {
		t.Errorf("recent miss: %v, %d requests", err, n.Load())
	}
	os.WriteFile(filepath.Join(cache, "cache_miss_s"), []byte("0\n"), 0o644)
	if _, err := newClient(cache, srv.URL).Debuginfo(context.Background(), "aabb"); !errors.Is(err, ErrNotFound) || n.Load() != 1 {
		t.Errorf("expired miss: %v, %d requests", err, n.Load())
	}
}

func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	o, w := FromEnv(env("DEBUGINFOD_URLS", " https://a.example/  ftp://b  http://c:8002 file:///x ", "HOME", "/h", "DEBUGINFOD_TIMEOUT", "5"))
	if !slices.Equal(o.URLs, []string{"https://a.example", "http://c:8002"}) || len(w) != 2 || o.Timeout != 5*time.Second {
		t.Errorf("urls %q warnings %q timeout %v", o.URLs, w, o.Timeout)
	}
	for _, tc := range []struct {
		env  func(string) string
		want string
	}{
		{env("DEBUGINFOD_CACHE_PATH", "/c", "XDG_CACHE_HOME", "/x", "HOME", "/h"), "/c"},
		{env("XDG_CACHE_HOME", "/x", "HOME", "/h"), "/x/debuginfod_client"},
		{env("HOME", "/h"), "/h/.cache/debuginfod_client"},
		{env(), ""},
	} {
		if got := CacheDir(tc.env); got != tc.want {
			t.Errorf("cache dir %q, want %q", got, tc.want)
		}
	}
}

// While paused (a capture in progress) only the cache answers.
func TestPause(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	debug, _ := os.ReadFile(sp.Debug)
	srv, n := counting(t, func(w http.ResponseWriter, r *http.Request) { w.Write(debug) })
	c := newClient(filepath.Join(t.TempDir(), "cache"), srv.URL)
	resume := c.Pause()
	if _, err := c.Debuginfo(context.Background(), sp.BuildID); !errors.Is(err, ErrDeferred) || n.Load() != 0 {
		t.Fatalf("paused: %v, %d requests", err, n.Load())
	}
	resume()
	resume() // once only
	p, err := c.Debuginfo(context.Background(), sp.BuildID)
	if err != nil || n.Load() != 1 {
		t.Fatalf("resumed: %v, %d requests", err, n.Load())
	}
	defer c.Pause()()
	if q, err := c.Debuginfo(context.Background(), sp.BuildID); q != p || err != nil {
		t.Errorf("paused, cached: %q, %v", q, err)
	}
}

// On a terminal the progress line is rewritten in place and cleared at
// the end; nothing is left on the line.
func TestProgressOnTerminal(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	debug, _ := os.ReadFile(sp.Debug)
	srv, _ := counting(t, func(w http.ResponseWriter, r *http.Request) { w.Write(debug) })
	var out bytes.Buffer
	c := New(Options{URLs: []string{srv.URL}, CacheDir: filepath.Join(t.TempDir(), "cache"), Progress: &out, Terminal: true})
	if _, err := c.Debuginfo(context.Background(), sp.BuildID); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.HasPrefix(s, "\r\033[Kstackshot: debuginfod: downloading 1 file(s), ") || !strings.HasSuffix(s, "\r\033[K") || strings.Contains(s, "\n") {
		t.Errorf("progress output %q", s)
	}
	if !strings.Contains(s, "1 done") {
		t.Errorf("progress never counted the file: %q", s)
	}
}

// An answer that is no ELF file (a proxy's error page, a captive portal's
// login form, noise) is named for what it is: the server answered, with
// something else. From that server the file is not found: nothing is
// kept, the next server is asked, and the server is asked again for the
// next file (it is not down). Even when the page is held open, the fetch
// does not wait on it until the time runs out.
func TestNotELFAnswer(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	debug, _ := os.ReadFile(sp.Debug)
	page := "<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head><body>Please sign in.</body></html>\n"
	noise := make([]byte, 256<<10)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	noise[0] = 0 // never the ELF magic
	cases := []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request)
		what   string
	}{
		{"login page", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, page)
		}, `(text/html, starting "<!DOCTYPE html>\n")`},
		{"login page, held open", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, page)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, "(text/html, starting"},
		{"noise", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(noise)
		}, fmt.Sprintf("(application/octet-stream, starting %+q)", noise[:16])},
		{"no content type", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil // not sniffed
			w.Write(noise)
		}, "(no content type, starting"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			junk, nj := counting(t, tc.handle)
			good, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/buildid/"+sp.BuildID+"/debuginfo" {
					http.NotFound(w, r)
					return
				}
				w.Write(debug)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			cache := filepath.Join(t.TempDir(), "cache")
			c := newClient(cache, junk.URL, good.URL)
			p, err := c.Debuginfo(ctx, sp.BuildID)
			if err != nil || p != filepath.Join(cache, sp.BuildID, "debuginfo") {
				t.Fatalf("the second server has it: %q, %v", p, err)
			}
			said := "the server answered debuginfo of " + sp.BuildID + " with something that is not an ELF file with a build id " + tc.what
			w := c.Warnings()
			if len(w) != 1 || !strings.Contains(w[0], junk.URL) || !strings.Contains(w[0], said) {
				t.Errorf("warnings %q, want one naming %s with %q", w, junk.URL, said)
			}
			// The next file: the server is asked again, and an answer
			// that is no ELF file is "not found", said as what it was.
			_, err = c.Executable(ctx, sp.BuildID)
			if !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "answered executable of "+sp.BuildID+" with something that is not an ELF file") {
				t.Errorf("executable: %v, want not found, for an answer that is no ELF file", err)
			}
			if nj.Load() != 2 {
				t.Errorf("the server that answered was asked %d times, want 2 (it is not down)", nj.Load())
			}
			if files := testutil.CacheFiles(t, cache); !slices.Equal(files, []string{sp.BuildID + "/debuginfo 0400"}) || testutil.HasTemp(cache) {
				t.Errorf("the cache holds %v", files)
			}
		})
	}
}

// The first bytes of an answer are looked at as soon as they arrive: an
// answer that cannot be an ELF file ends there (not at MaxBytes, nor when
// the server stops sending), and so does one whose announced length is
// more than MaxBytes. Nothing is made in the cache.
func TestNotELFAnswerEndsAtOnce(t *testing.T) {
	ident := func(class, data, version byte) string {
		return "\x7fELF" + string([]byte{class, data, version}) + strings.Repeat("\x00", 64)
	}
	cases := []struct {
		name, first, length, want string
	}{
		{"page", "<html><body>Access denied</body></html>\n", "", `not an ELF file with a build id (text/html, starting "<html><body>Acce")`},
		{"short", "\x7fEL", "", `starting "\x7fEL"`},
		{"unknown class", ident(9, 1, 1), "", "an ELF header of unknown class 9"},
		{"unknown data encoding", ident(2, 3, 1), "", "an ELF header of unknown data encoding 3"},
		{"unknown version", ident(2, 1, 0), "", "an ELF header of unknown version 0"},
		{"too large, announced", ident(2, 1, 1), fmt.Sprint(int64(DefaultMaxBytes) + 1), "more than the"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hungUp := make(chan bool, 1)
			srv, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.length != "" {
					w.Header().Set("Content-Length", tc.length)
				}
				fmt.Fprint(w, tc.first)
				w.(http.Flusher).Flush()
				if tc.name == "short" {
					hungUp <- true // the whole answer
					return
				}
				select {
				case <-r.Context().Done():
					hungUp <- true
				case <-time.After(5 * time.Second):
					hungUp <- false
				}
			})
			cache := filepath.Join(t.TempDir(), "cache")
			c := New(Options{URLs: []string{srv.URL}, CacheDir: cache, Timeout: 10 * time.Second})
			start := time.Now()
			_, err := c.Debuginfo(context.Background(), "aabbccdd")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrRejected) {
				t.Errorf("err %v, want a rejection with %q", err, tc.want)
			}
			if !<-hungUp {
				t.Errorf("the client read on, waiting for more of an answer it could not use")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("rejected after %v", d)
			}
			if _, err := os.Lstat(cache); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the cache directory was made for an answer rejected at its first bytes (%v)", err)
			}
		})
	}
}

// The first look accepts every ELF header the symbolizer reads (both
// classes, both byte orders), and waits for the bytes that arrive one at
// a time.
func TestELFHeaderFirstLook(t *testing.T) {
	for _, h := range []string{"\x7fELF\x02\x01\x01", "\x7fELF\x01\x01\x01", "\x7fELF\x02\x02\x01", "\x7fELF\x01\x02\x01\x00"} {
		if why := notELF([]byte(h + strings.Repeat("\x00", 16-len(h)))); why != "" {
			t.Errorf("%+q: %s", h, why)
		}
	}
	sp := testutil.SplitTarget(t, "blocked", false)
	debug, _ := os.ReadFile(sp.Debug)
	srv, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 20 {
			w.Write(debug[i : i+1])
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
		w.Write(debug[20:])
	})
	p, err := newClient(filepath.Join(t.TempDir(), "cache"), srv.URL).Debuginfo(context.Background(), sp.BuildID)
	if err != nil {
		t.Fatalf("an ELF file sent a byte at a time: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, debug) {
		t.Errorf("cached %d bytes, want the %d served", len(got), len(debug))
	}
}

// An attempt that keeps no file takes away the directories the Client
// made for it (the cache, the directories above it, the build-id
// directory) and nothing else.
func TestRejectedDownloadLeavesNoDirectories(t *testing.T) {
	sp, _, debug, otherDebug := twoDebugFiles(t)
	cases := []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request)
		max    int64
	}{
		{"wrong build id", func(w http.ResponseWriter, r *http.Request) { w.Write(otherDebug) }, 0},
		{"truncated ELF", func(w http.ResponseWriter, r *http.Request) { w.Write(debug[:len(debug)/3]) }, 0},
		{"cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(len(debug)))
			w.Write(debug[:len(debug)/2])
		}, 0},
		{"too large, streamed", func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush()
			w.Write(debug)
		}, int64(len(debug) - 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := counting(t, tc.handle)
			root := t.TempDir()
			cache := filepath.Join(root, "a", "b", "cache")
			c := New(Options{URLs: []string{srv.URL}, CacheDir: cache, MaxBytes: tc.max, Timeout: 10 * time.Second})
			if _, err := c.Debuginfo(context.Background(), sp.BuildID); err == nil {
				t.Fatal("no error")
			}
			if left := dirTree(t, root); len(left) != 0 {
				t.Errorf("left behind: %q", left)
			}
			// Directories that were there before stay.
			os.MkdirAll(filepath.Join(cache, sp.BuildID), 0o700)
			c.Executable(context.Background(), sp.BuildID)
			if left := dirTree(t, root); !slices.Equal(left, []string{"a/", "a/b/", "a/b/cache/", "a/b/cache/" + sp.BuildID + "/"}) {
				t.Errorf("directories made by another: %q left, want all", left)
			}
		})
	}
}

// A directory the Client made is taken away only while it is empty and
// still the one it made: not while another download writes into it, not
// when something else (a directory, a symlink) has taken its place.
func TestDirectoriesTakenAwayOnlyWhenTheirs(t *testing.T) {
	sp, _, debug, otherDebug := twoDebugFiles(t)
	// waitTemp waits until a download is being written into dir.
	waitTemp := func(dir string) {
		for range 500 {
			if testutil.HasTemp(dir) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("no download began in %s", dir)
	}

	t.Run("in use", func(t *testing.T) {
		root := t.TempDir()
		cache := filepath.Join(root, "cache")
		idDir := filepath.Join(cache, sp.BuildID)
		release := make(chan struct{})
		srv, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/executable") {
				w.Write(otherDebug) // rejected: another build id
				return
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(debug)))
			w.Write(debug[:4096])
			w.(http.Flusher).Flush()
			<-release // then cut short
		})
		c := newClient(cache, srv.URL)
		done := make(chan error)
		go func() {
			_, err := c.Debuginfo(context.Background(), sp.BuildID)
			done <- err
		}()
		waitTemp(idDir)
		if _, err := c.Executable(context.Background(), sp.BuildID); !errors.Is(err, ErrRejected) {
			t.Errorf("executable: %v, want a rejection", err)
		}
		if _, err := os.Stat(idDir); err != nil {
			t.Errorf("a rejected download took away the directory another one writes into: %v", err)
		}
		close(release)
		if err := <-done; err == nil || !strings.Contains(err.Error(), "cut short") {
			t.Errorf("debuginfo: %v, want cut short", err)
		}
		// The last attempt out takes the directories away, whoever made them.
		if left := dirTree(t, root); len(left) != 0 {
			t.Errorf("left behind: %q", left)
		}
	})

	for _, swap := range []string{"directory", "symlink"} {
		t.Run("replaced by a "+swap, func(t *testing.T) {
			root := t.TempDir()
			cache := filepath.Join(root, "cache")
			idDir := filepath.Join(cache, sp.BuildID)
			elsewhere := t.TempDir()
			srv, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
				w.Write(debug[:4096])
				w.(http.Flusher).Flush()
				waitTemp(idDir)
				// Another user with write access to the cache swaps the
				// build-id directory while the download runs.
				if err := os.Rename(idDir, idDir+".moved"); err != nil {
					t.Error(err)
				}
				if swap == "directory" {
					os.Mkdir(idDir, 0o700)
				} else {
					os.Symlink(elsewhere, idDir)
				}
				// then the answer ends: a truncated file, rejected
			})
			if _, err := newClient(cache, srv.URL).Debuginfo(context.Background(), sp.BuildID); !errors.Is(err, ErrRejected) {
				t.Fatalf("err %v, want a rejection", err)
			}
			st, err := os.Lstat(idDir)
			if err != nil {
				t.Fatalf("the %s put in place of the Client's directory was taken away: %v", swap, err)
			}
			if swap == "symlink" && st.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s is %v, want the symlink", idDir, st.Mode())
			}
			if _, err := os.Stat(elsewhere); err != nil {
				t.Errorf("the symlink's target was taken away: %v", err)
			}
		})
	}
}

// dirTree lists the directories under root, relative to it, each with a
// trailing slash (files too, without).
func dirTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	return out
}
