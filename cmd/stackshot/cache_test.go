//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// entryTimes lists the cache entries (*.c) in dir: name -> inode and
// mtime. A rewritten entry gets a new inode; a read one a new mtime.
func entryTimes(t *testing.T, dir string) map[string][2]int64 {
	t.Helper()
	out := map[string][2]int64{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".c") {
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(dir, e.Name()), &st); err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = [2]int64{int64(st.Ino), st.Mtim.Nano()}
		}
	}
	return out
}

// ageEntries sets every entry's mtime in dir an hour back: a read (which
// notes the last use) shows.
func ageEntries(dir string) {
	old := time.Now().Add(-time.Hour)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.Chtimes(filepath.Join(dir, e.Name()), old, old)
	}
}

// A dump of another user's process (parsed in the sandboxed child) keeps
// its entries in a namespace of the cache of the target's owner: the
// second dump reads them all, rewrites none and shows the uncached dump;
// damaged ones are rebuilt. The main namespace (what stackshot parses
// in-process: --no-sandbox) and the child's never read each other's.
func TestCacheSandboxNamespace(t *testing.T) {
	tg := startService(t)
	pid := strconv.Itoa(tg.PID)
	want, _ := runCache(t, "", "-s", "-i", pid)
	dir := filepath.Join(t.TempDir(), "cache")
	ns := filepath.Join(dir, "ns-u"+strconv.Itoa(serviceUID)+"-g"+strconv.Itoa(serviceUID))
	run := func(stage string, args ...string) {
		t.Helper()
		got, errOut := runCache(t, dir, append(args, "-s", "-i", pid)...)
		if got != want || errOut != "" {
			t.Fatalf("%s: stderr %q\n got  %s\n want %s", stage, errOut, got, want)
		}
	}
	run("cold")
	cold := entryTimes(t, ns)
	if len(cold) < 3 || len(entryTimes(t, dir)) != 0 {
		t.Fatalf("cold sandboxed dump: %d entries in %s, %d in the main namespace", len(cold), ns, len(entryTimes(t, dir)))
	}
	ageEntries(ns)
	aged := entryTimes(t, ns)
	run("warm")
	warm := entryTimes(t, ns)
	for n, c := range aged {
		if w, ok := warm[n]; !ok || w[0] != c[0] || w[1] == c[1] {
			t.Errorf("warm: entry %s %v, before %v (want the same file, read)", n, w, c)
		}
	}
	if len(warm) != len(cold) {
		t.Errorf("warm: %d entries, cold %d", len(warm), len(cold))
	}
	for n := range warm {
		p := filepath.Join(ns, n)
		b, _ := os.ReadFile(p)
		b[len(b)/2] ^= 0xff
		os.Remove(p)
		os.WriteFile(p, b, 0o600)
	}
	damaged := entryTimes(t, ns)
	run("damaged")
	for n, r := range entryTimes(t, ns) {
		if d, ok := damaged[n]; ok && d[0] == r[0] {
			t.Errorf("damaged entry %s not rebuilt", n)
		}
	}
	// In-process: the main namespace, which the child then leaves alone.
	ageEntries(ns)
	aged = entryTimes(t, ns)
	run("in-process", "--no-sandbox")
	if fmt.Sprint(entryTimes(t, ns)) != fmt.Sprint(aged) {
		t.Error("the in-process dump read or wrote the child's namespace")
	}
	main := entryTimes(t, dir)
	if len(main) == 0 {
		t.Fatal("the in-process dump wrote no entry to the main namespace")
	}
	ageEntries(dir)
	main = entryTimes(t, dir)
	run("sandboxed again")
	if fmt.Sprint(entryTimes(t, dir)) != fmt.Sprint(main) {
		t.Error("the child read or wrote the main namespace")
	}
}

// report parses a capture file in the child: its entries go to a namespace
// of that file (the same bytes), and a second report is served from it.
func TestCacheSandboxReport(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to nobody")
	}
	own := testutil.Start(t, buildBlocked(t, blockedVariants[0].flags))
	capFile := filepath.Join(t.TempDir(), "c.cap")
	if _, se, code := runSS(t, "capture", fmt.Sprint(own.PID), "-o", capFile); code != 0 {
		t.Fatalf("capture: exit %d\n%s", code, se)
	}
	want, _ := runCache(t, "", "report", "-s", capFile)
	dir := filepath.Join(t.TempDir(), "cache")
	nsOf := func() string {
		t.Helper()
		ents, _ := filepath.Glob(filepath.Join(dir, "ns-f*"))
		if len(ents) != 1 {
			t.Fatalf("namespaces of the capture file: %v", ents)
		}
		return ents[0]
	}
	for i, stage := range []string{"cold", "warm"} {
		got, errOut := runCache(t, dir, "report", "-s", capFile)
		if got != want || errOut != "" || !strings.Contains(got, "reader_c") {
			t.Fatalf("%s report: stderr %q\n got  %s\n want %s", stage, errOut, got, want)
		}
		if i == 0 {
			if len(entryTimes(t, nsOf())) == 0 || len(entryTimes(t, dir)) != 0 {
				t.Fatalf("cold report: entries %v, main %v", entryTimes(t, nsOf()), entryTimes(t, dir))
			}
			ageEntries(nsOf())
			continue
		}
	}
	for n, e := range entryTimes(t, nsOf()) {
		if time.Since(time.Unix(0, e[1])) > 30*time.Minute {
			t.Errorf("warm report did not read entry %s", n)
		}
	}
}
