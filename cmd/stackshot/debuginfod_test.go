//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// runEnv runs stackshot with extra environment. A run that does not end
// within a minute is killed and fails the test (a hang guard, not a
// timing assertion: --timeout is far shorter).
func runEnv(t testing.TB, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runBinEnv(t, stackshotBin, env, args...)
}

// runBinEnv is runEnv of bin (stackshot, or its build with test hooks).
func runBinEnv(t testing.TB, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("stackshot %v did not end within a minute", args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running stackshot: %v", err)
	}
	return so.String(), se.String(), code
}

func dumpEnv(t testing.TB, env []string, args ...string) (jProc, string) {
	t.Helper()
	out, errOut, code := runEnv(t, env, append([]string{"dump", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("stackshot dump %v: exit %d\n%s", args, code, errOut)
	}
	var p jProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	return p, errOut
}

// debugEnv is the environment of a run against servers, with its own
// cache (and no other variable of the operator's leaking in).
func debugEnv(cache string, urls ...string) []string {
	return []string{"DEBUGINFOD_URLS=" + strings.Join(urls, " "), "DEBUGINFOD_CACHE_PATH=" + cache, "DEBUGINFOD_PROGRESS=", "DEBUGINFOD_TIMEOUT="}
}

// readerFrames are the reader thread's frames in the target's own module.
func readerFrames(t testing.TB, p jProc, module string) []jFrame {
	t.Helper()
	th := threadByName(t, p, "reader")
	var out []jFrame
	for _, f := range th.Frames {
		if f.Kind == "user" && filepath.Base(f.Module) == module {
			out = append(out, f)
		}
	}
	if len(out) < 3 {
		t.Fatalf("reader: %d frames in %s", len(out), module)
	}
	return out
}

// wantReaderLines checks that the reader chain has names, blocked.c and
// lines: what only the debug file gives a stripped binary.
func wantReaderLines(t testing.TB, p jProc, module string) {
	t.Helper()
	fr := readerFrames(t, p, module)
	for i, name := range []string{"reader_c", "reader_b", "reader_a"} {
		f := fr[i]
		if f.Fn() != name || filepath.Base(f.File) != "blocked.c" || f.Line <= 0 {
			t.Errorf("reader frame %d: %s at %s:%d, want %s at blocked.c:N", i, f.Fn(), f.File, f.Line, name)
		}
	}
}

// The real elfutils server over the debug file of a fully stripped target:
// names and lines arrive, into the shared cache, in the shared layout; the
// next run uses the cache with the server down, silently.
func TestDebuginfodNamesAndLines(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	srv := testutil.StartDebuginfod(t, []string{sp.Debug}, "/buildid/"+sp.BuildID+"/debuginfo")
	tg := testutil.Start(t, sp.Exe)
	mod := filepath.Base(sp.Exe)
	cache := filepath.Join(t.TempDir(), "cache")

	off, _ := dumpEnv(t, debugEnv(cache, srv.URL), "--no-debuginfod", fmt.Sprint(tg.PID))
	for _, f := range readerFrames(t, off, mod) {
		if f.Function != nil || f.Line != 0 {
			t.Errorf("--no-debuginfod: a stripped binary's frame is named %s:%d", f.Fn(), f.Line)
		}
	}
	if files := testutil.CacheFiles(t, cache); len(files) != 0 {
		t.Errorf("--no-debuginfod fetched %v", files)
	}

	p, errOut := dumpEnv(t, debugEnv(cache, srv.URL), "-s", fmt.Sprint(tg.PID))
	wantReaderLines(t, p, mod)
	if errOut != "" {
		t.Errorf("stderr %q", errOut)
	}
	if files, want := testutil.CacheFiles(t, cache), []string{sp.BuildID + "/debuginfo 0400"}; !slices.Equal(files, want) {
		t.Errorf("cache %v, want %v", files, want)
	}

	p, errOut = dumpEnv(t, debugEnv(cache, testutil.DeadURL(t)), fmt.Sprint(tg.PID))
	wantReaderLines(t, p, mod)
	if errOut != "" {
		t.Errorf("cached file, server down: stderr %q", errOut)
	}
	assertUntouched(t, tg.PID, false)
}

// A server that is down, silent, or answers garbage or another build's
// file: one clear line on stderr, names from the binary's symbol table, no
// lines, nothing in the cache, exit 0.
func TestDebuginfodBadServers(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", true)
	other := testutil.SplitTarget(t, "hot", false)
	otherDebug, _ := os.ReadFile(other.Debug)
	tg := testutil.Start(t, sp.Exe)
	mod := filepath.Base(sp.Exe)
	serve := func(body []byte) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/debuginfo") {
				w.Write(body)
				return
			}
			http.NotFound(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	block := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); silent.Close() })
	cases := []struct {
		name, url, why string
		args           []string
	}{
		{"down", testutil.DeadURL(t), "unreachable: connection refused", nil},
		{"silent", silent.URL, "no answer in the time --timeout leaves", []string{"--timeout", "8s"}},
		{"garbage", serve([]byte(strings.Repeat("garbage ", 4096))), "is not an ELF file with a build id", nil},
		{"wrong build id", serve(otherDebug), "carries build id " + other.BuildID, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "cache")
			p, errOut := dumpEnv(t, debugEnv(cache, tc.url), append(tc.args, "-s", fmt.Sprint(tg.PID))...)
			for i, name := range []string{"reader_c", "reader_b", "reader_a"} {
				if f := readerFrames(t, p, mod)[i]; f.Fn() != name || f.Line != 0 {
					t.Errorf("reader frame %d: %s:%d, want %s from the symbol table, no line", i, f.Fn(), f.Line, name)
				}
			}
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			want := regexp.MustCompile(`^stackshot: debuginfod server ` + regexp.QuoteMeta(tc.url) + ` failed \(.*` + regexp.QuoteMeta(tc.why) + `.*; .*--no-debuginfod\)$`)
			if len(lines) != 1 || !want.MatchString(lines[0]) {
				t.Errorf("stderr %q, want one line matching %s", errOut, want)
			}
			if files := testutil.CacheFiles(t, cache); len(files) != 0 || testutil.HasTemp(cache) {
				t.Errorf("cache holds %v", files)
			}
		})
	}
	assertUntouched(t, tg.PID, false)
}

// Fetching happens after the capture, with every thread running: the
// server looks at the target's threads while it is asked, and delays.
// Also: the progress line (DEBUGINFOD_PROGRESS off a terminal), -q, and
// --no-debuginfod asking nothing.
func TestDebuginfodWhileTargetRuns(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	debug, _ := os.ReadFile(sp.Debug)
	tg := testutil.Start(t, sp.Exe)
	var mu sync.Mutex
	var seen []string
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/buildid/"+sp.BuildID+"/debuginfo" {
			http.NotFound(w, r)
			return
		}
		asked.Add(1)
		for i := 0; i < 3; i++ {
			states := testutil.ThreadStates(tg.PID)
			mu.Lock()
			for tid, s := range states {
				seen = append(seen, fmt.Sprintf("%d:%s", tid, s))
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
		w.Write(debug)
	}))
	t.Cleanup(srv.Close)
	mod := filepath.Base(sp.Exe)

	cache := filepath.Join(t.TempDir(), "cache")
	env := append(debugEnv(cache, srv.URL), "DEBUGINFOD_PROGRESS=1")
	p, errOut := dumpEnv(t, env, "--mode", "stop", fmt.Sprint(tg.PID))
	wantReaderLines(t, p, mod)
	if asked.Load() != 1 {
		t.Fatalf("server asked %d times", asked.Load())
	}
	if len(seen) < 3*len(p.Threads) {
		t.Fatalf("saw %d thread states", len(seen))
	}
	for _, s := range seen {
		if strings.HasSuffix(s, ":t") || strings.HasSuffix(s, ":T") {
			t.Errorf("thread %s was stopped while a debug file was fetched", s)
		}
	}
	wantProgress := fmt.Sprintf("stackshot: debuginfod: fetched %s/debuginfo (%.1f KiB) from %s\n", sp.BuildID, float64(len(debug))/1024, srv.URL)
	if errOut != wantProgress {
		t.Errorf("stderr %q, want %q", errOut, wantProgress)
	}

	// -q: nothing on stderr; --no-debuginfod: nothing asked.
	_, errOut = dumpEnv(t, append(debugEnv(filepath.Join(t.TempDir(), "c2"), srv.URL), "DEBUGINFOD_PROGRESS=1"), "-q", fmt.Sprint(tg.PID))
	if errOut != "" || asked.Load() != 2 {
		t.Errorf("-q: stderr %q, asked %d", errOut, asked.Load())
	}
	dumpEnv(t, debugEnv(filepath.Join(t.TempDir(), "c3"), srv.URL), "--no-debuginfod", fmt.Sprint(tg.PID))
	if asked.Load() != 2 {
		t.Errorf("--no-debuginfod: server asked")
	}
	assertUntouched(t, tg.PID, false)
}

// report on another machine: the binary the capture names is gone, so the
// executable and its debug file both come from the real server by build id.
func TestReportFetchesMissingExecutable(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	srv := testutil.StartDebuginfod(t, []string{sp.Debug, sp.Exe}, "/buildid/"+sp.BuildID+"/debuginfo", "/buildid/"+sp.BuildID+"/executable")
	dir := t.TempDir()
	exe := filepath.Join(dir, "blocked-moved")
	b, _ := os.ReadFile(sp.Exe)
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tg := testutil.Start(t, exe)
	file := filepath.Join(dir, "c.capture")
	if _, errOut, code := runSS(t, "capture", "-o", file, fmt.Sprint(tg.PID)); code != 0 {
		t.Fatalf("capture: exit %d: %s", code, errOut)
	}
	tg.Stop()
	os.Remove(exe)
	cache := filepath.Join(dir, "cache")

	out, errOut, code := runEnv(t, debugEnv(cache, srv.URL), "report", "--json", "-s", file)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	var p jProc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	wantReaderLines(t, p, filepath.Base(exe))
	files := testutil.CacheFiles(t, cache)
	if want := []string{sp.BuildID + "/debuginfo 0400", sp.BuildID + "/executable 0400"}; !slices.Equal(files, want) {
		t.Errorf("cache %v, want %v", files, want)
	}
}
