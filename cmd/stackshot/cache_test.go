//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

// runCache runs stackshot with the cache in dir ("" : STACKSHOT_NO_CACHE=1)
// and returns stdout and stderr; a failure to run is fatal.
func runCache(t *testing.T, dir string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(stackshotBin, args...)
	if dir == "" {
		cmd.Env = append(os.Environ(), "STACKSHOT_NO_CACHE=1")
	} else {
		cmd.Env = append(os.Environ(), "STACKSHOT_CACHE_DIR="+dir)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("stackshot %v: %v\n%s", args, err, se.String())
	}
	return so.String(), se.String()
}

// TestCacheSameOutput dumps a blocked C target with file:line and inlines
// and symbolizes libc addresses (through its separate debug file): without
// the cache, with --no-cache, cold, warm, with every entry damaged (bytes
// flipped, truncated, replaced by a symlink, by another entry), and with a
// cache directory that must not be used (another user's, a symlink, world
// writable). The output is always the no-cache output; an unusable
// directory costs one warning line and nothing else.
func TestCacheSameOutput(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "4")
	pid := strconv.Itoa(tg.PID)
	cmds := [][]string{{"dump", "-s", "-i", "--mode", "stop", pid}, {"dump", pid}}
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err == nil {
		out, err := exec.Command("nm", "-D", "--defined-only", libc).Output()
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"symbolize", "-a", "-e", libc}
		for i, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); i%40 == 0 && len(f) == 3 && (f[1] == "T" || f[1] == "t") {
				args = append(args, "0x"+f[0])
			}
		}
		cmds = append(cmds, args)
	}
	want := make([]string, len(cmds))
	for i, c := range cmds {
		want[i], _ = runCache(t, "", c...)
		if nc, _ := runCache(t, filepath.Join(t.TempDir(), "unused"), append([]string{c[0], "--no-cache"}, c[1:]...)...); nc != want[i] {
			t.Fatalf("--no-cache differs from STACKSHOT_NO_CACHE=1 for %v", c)
		}
	}
	if !strings.Contains(want[0], "work_b") || !strings.Contains(want[0], "many.c:") {
		t.Fatalf("the -s -i dump lacks the target's frames:\n%s", want[0])
	}
	dir := filepath.Join(t.TempDir(), "cache")
	check := func(stage, dir string, warn bool) {
		t.Helper()
		for i, c := range cmds {
			got, errOut := runCache(t, dir, c...)
			if got != want[i] {
				t.Errorf("%s: %v differs from the no-cache run:\n got  %s\n want %s", stage, c, got, want[i])
			}
			lines := strings.Count(errOut, "\n")
			if warn && (lines != 1 || !strings.Contains(errOut, "not using the cache")) || !warn && errOut != "" {
				t.Errorf("%s: %v: stderr %q", stage, c, errOut)
			}
		}
	}
	check("cold", dir, false)
	ents, _ := os.ReadDir(dir)
	if len(ents) < 3 {
		t.Fatalf("the cold runs left %d cache entries", len(ents))
	}
	check("warm", dir, false)
	damages := map[string]func(p string, b []byte, other string){
		"flipped":   func(p string, b []byte, _ string) { b[len(b)-5] ^= 1; os.WriteFile(p, b, 0o600) },
		"truncated": func(p string, b []byte, _ string) { os.WriteFile(p, b[:len(b)/2], 0o600) },
		"symlink":   func(p string, _ []byte, other string) { os.Remove(p); os.Symlink(other, p) },
		"foreign": func(p string, _ []byte, other string) {
			if b, err := os.ReadFile(other); err == nil {
				os.WriteFile(p, b, 0o600)
			}
		},
	}
	for _, how := range []string{"flipped", "truncated", "symlink", "foreign"} {
		ents, _ := os.ReadDir(dir)
		for i, e := range ents {
			p := filepath.Join(dir, e.Name())
			b, err := os.ReadFile(p)
			if err != nil || e.Name()[0] == '.' {
				continue
			}
			damages[how](p, b, filepath.Join(dir, ents[(i+1)%len(ents)].Name()))
		}
		check(how, dir, false)
	}
	base := t.TempDir()
	other := filepath.Join(base, "other")
	os.Mkdir(other, 0o700)
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		check("another user's directory", other, true)
	}
	link := filepath.Join(base, "link")
	os.Symlink(dir, link)
	check("symlinked directory", link, true)
	wide := filepath.Join(base, "wide")
	os.Mkdir(wide, 0o700)
	os.Chmod(wide, 0o777)
	check("world-writable directory", wide, true)
	if ents, _ := os.ReadDir(other); len(ents) != 0 {
		t.Errorf("stackshot wrote %d entries into another user's directory", len(ents))
	}
}

// A dump of another user's process parses in the sandboxed child, which has
// no cache: it writes no entry, shows what an uncached dump shows, and
// warns about nothing.
func TestCacheNotInSandbox(t *testing.T) {
	tg := startService(t)
	pid := strconv.Itoa(tg.PID)
	want, _ := runCache(t, "", "-s", "-i", pid)
	dir := filepath.Join(t.TempDir(), "cache")
	for _, stage := range []string{"first", "second"} {
		got, errOut := runCache(t, dir, "-s", "-i", pid)
		if got != want || errOut != "" {
			t.Fatalf("%s sandboxed dump with a cache directory: stderr %q\n got  %s\n want %s", stage, errOut, got, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a sandboxed dump wrote %d cache entries", len(ents))
	}
	// The same process parsed in-process (--no-sandbox) does use it.
	runCache(t, dir, "--no-sandbox", "-s", "-i", pid)
	if ents, _ := os.ReadDir(dir); len(ents) == 0 {
		t.Fatal("an in-process dump wrote no cache entry")
	}
}
