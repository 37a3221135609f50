package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"stackshot/internal/testutil"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// binary builds stackshot once for the tests here.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gendocs")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "stackshot")
		cmd := exec.Command("go", "build", "-o", built, "./cmd/stackshot")
		cmd.Dir = testutil.Root()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "building stackshot: " + e.err.Error() + "\n" + string(e.out)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built != "" {
		os.RemoveAll(filepath.Dir(built))
	}
	os.Exit(code)
}

// The committed man page and completions are what the binary's help
// makes now: help and man page cannot disagree.
func TestGeneratedFilesMatchHelp(t *testing.T) {
	h, err := Read(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range Files(h) {
		got, err := os.ReadFile(filepath.Join(testutil.Root(), "docs", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/%s is not what 'stackshot help' makes now (%v): run make docs and commit it", name, err)
		}
	}
	// Every flag a command's help lists is in its part of the man page.
	man := string(Man(h))
	for _, c := range h.Commands {
		sec := man[strings.Index(man, ".SS "+dash(c.Synopsis)):]
		for _, f := range c.Flags {
			if !strings.Contains(sec, `\fB\-\-`+dash(f.Long)+`\fR`) {
				t.Errorf("the man page's %s section lacks --%s", c.Name, f.Long)
			}
		}
	}
}

// man renders the page without a warning, with every command and the
// flags of dump, the main use.
func TestManPageRenders(t *testing.T) {
	testutil.Need(t, "man")
	page := filepath.Join(testutil.Root(), "docs", "stackshot.1")
	cmd := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", page)
	cmd.Env = append(os.Environ(), "MANWIDTH=100", "MANPAGER=cat", "PAGER=cat")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("man -l %s: %v\n%s", page, err, stderr.String())
	}
	text := string(out)
	for _, want := range []string{"STACKSHOT(1)", "NAME", "stackshot - ", "SYNOPSIS", "COMMANDS",
		"stackshot dump [flags] PID...", "stackshot record [flags] PID...", "stackshot report [flags] FILE...",
		"-p, --pid PID", "--no-kernel", "--max-frames N", "stackshot dump 1234", "ENVIRONMENT", "DEBUGINFOD_URLS"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered man page lacks %q", want)
		}
	}
}

// complete runs the bash completion on a command line (the last word is
// the one completed) and returns what it offers.
func complete(t *testing.T, line ...string) []string {
	t.Helper()
	script := filepath.Join(testutil.Root(), "docs", "completion", "stackshot.bash")
	words := make([]string, len(line))
	for i, w := range line {
		words[i] = "'" + w + "'"
	}
	prog := "source " + script + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\nCOMP_CWORD=" +
		strconv.Itoa(len(line)-1) + "\n_stackshot\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", prog)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash completion of %q: %v\n%s", line, err, out)
	}
	return strings.Fields(string(out))
}

func TestBashCompletion(t *testing.T) {
	testutil.Need(t, "bash")
	self := strconv.Itoa(os.Getpid())
	cases := []struct {
		line      []string
		want, not []string
	}{
		{[]string{"stackshot", "rec"}, []string{"record"}, nil},
		{[]string{"stackshot", "dump", "--no-k"}, []string{"--no-kernel"}, nil},
		{[]string{"stackshot", "record", "--fr"}, []string{"--freq"}, nil},
		{[]string{"stackshot", "dump", "--fr"}, nil, []string{"--freq"}}, // record's, not dump's
		{[]string{"stackshot", "--gr"}, []string{"--group"}, nil},        // stackshot PID is dump
		{[]string{"stackshot", "dump", "--mode", ""}, []string{"auto", "stop", "nostop"}, nil},
		{[]string{"stackshot", "record", "--sampler", ""}, []string{"perf", "ptrace", "auto"}, nil},
		{[]string{"stackshot", "dump", "-p", self}, []string{self}, nil},
		{[]string{"stackshot", "dump", self}, []string{self}, []string{"record"}},
		{[]string{"stackshot", "dump", "--timeout", ""}, nil, []string{self, "--pid"}}, // a duration: nothing to offer
	}
	for _, c := range cases {
		got := complete(t, c.line...)
		for _, w := range c.want {
			if !contains(got, w) {
				t.Errorf("completing %q offers %q, not %q", c.line, got, w)
			}
		}
		for _, w := range c.not {
			if contains(got, w) {
				t.Errorf("completing %q offers %q, which it should not", c.line, w)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// zsh reads the completion, and compinit registers it for stackshot.
func TestZshCompletion(t *testing.T) {
	testutil.Need(t, "zsh")
	file := filepath.Join(testutil.Root(), "docs", "completion", "_stackshot")
	if out, err := exec.Command("zsh", "-n", file).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n %s: %v\n%s", file, err, out)
	}
	dir := t.TempDir()
	prog := "fpath=(" + filepath.Dir(file) + " $fpath); autoload -Uz compinit; compinit -u -d " +
		filepath.Join(dir, "zcompdump") + "; print -r -- $_comps[stackshot]"
	cmd := exec.Command("zsh", "-f", "-c", prog)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_stackshot" {
		t.Fatalf("compinit did not take _stackshot for stackshot: %v\n%s", err, out)
	}
}

// make install lays the binary, the man page and the completions out
// under DESTDIR and PREFIX, where man, bash-completion and zsh look.
func TestMakeInstall(t *testing.T) {
	testutil.Need(t, "make")
	dest := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "install", "DESTDIR="+dest, "PREFIX=/opt/ss")
	cmd.Dir = testutil.Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	files := map[string]os.FileMode{
		"opt/ss/bin/stackshot":                               0o755,
		"opt/ss/share/man/man1/stackshot.1":                  0o644,
		"opt/ss/share/bash-completion/completions/stackshot": 0o644,
		"opt/ss/share/zsh/site-functions/_stackshot":         0o644,
	}
	for name, mode := range files {
		st, err := os.Stat(filepath.Join(dest, name))
		if err != nil {
			t.Errorf("make install: %v", err)
		} else if st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), mode)
		}
	}
	out, err := exec.Command(filepath.Join(dest, "opt/ss/bin/stackshot"), "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "stackshot ") {
		t.Errorf("the installed stackshot version: %v %q", err, out)
	}
	man, _ := os.ReadFile(filepath.Join(dest, "opt/ss/share/man/man1/stackshot.1"))
	docs, _ := os.ReadFile(filepath.Join(testutil.Root(), "docs", "stackshot.1"))
	if !bytes.Equal(man, docs) {
		t.Errorf("the installed man page is not docs/stackshot.1")
	}
}
