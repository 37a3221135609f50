//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

const (
	evilComm = "\x1b[2J\x1b[31mX"              // process and thread names
	evilFunc = "evil\x1b[2J\x1b]0;owned\x07fn" // hostile_fn, renamed
	evilSpin = "spin\x1b[2Jfn"                 // hostile_spin, renamed
	evilExe  = "hostile\x1b[31m\x07exe"        // the binary's file name
)

// buildHostile builds testdata/targets/hostile_names.c with its functions
// renamed to names full of escape sequences (objcopy --redefine-sym), and
// puts the binary at a path holding control characters.
func buildHostile(t *testing.T) string {
	t.Helper()
	objcopy := testutil.Need(t, "objcopy")
	obj := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "hostile_names.c")},
		"-O0", "-fno-omit-frame-pointer", "-pthread", "-c")
	dir := t.TempDir()
	renamed := filepath.Join(dir, "hostile_names.o")
	out, err := exec.Command(objcopy, "--redefine-sym", "hostile_fn="+evilFunc,
		"--redefine-sym", "hostile_spin="+evilSpin, obj, renamed).CombinedOutput()
	if err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	bin := testutil.Build(t, "gcc", []string{renamed}, "-pthread")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, evilExe)
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// noRawControls fails when out holds a byte a terminal acts on (anything
// below 0x20 except newline and tab, or DEL).
func noRawControls(t *testing.T, what, out string) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		if c := out[i]; (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			t.Errorf("%s prints a raw %#02x byte at %d: %q", what, c, i, out[max(0, i-40):min(len(out), i+40)])
			return
		}
	}
}

// A target whose process name, thread names, exe path, module and function
// names hold escape sequences: no command prints one raw; text shows them
// escaped, JSON keeps their exact value.
func TestHostileNamesEscaped(t *testing.T) {
	exe := buildHostile(t)
	tg := testutil.Start(t, exe)
	pid := fmt.Sprint(tg.PID)

	text, errOut, code := runSS(t, "dump", "-s", pid)
	if code != 0 {
		t.Fatalf("dump: exit %d: %s", code, errOut)
	}
	noRawControls(t, "dump (text)", text)
	noRawControls(t, "dump (stderr)", errOut)
	for _, want := range []string{
		`(\x1b[2J\x1b[31mX)`, // the process name
		`"\x1b[2J\x1b[31mX"`, // the thread name
		`evil\x1b[2J\x1b]0;owned\x07fn`,
		`(hostile\x1b[31m\x07exe+0x`,
		`/hostile\x1b[31m\x07exe:`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("dump text lacks %s:\n%s", want, text)
		}
	}

	js, errOut, code := runSS(t, "dump", "--json", pid)
	if code != 0 {
		t.Fatalf("dump --json: exit %d: %s", code, errOut)
	}
	noRawControls(t, "dump (json)", js)
	var p jProc
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatal(err)
	}
	if p.Comm != evilComm || filepath.Base(p.Exe) != evilExe {
		t.Errorf("json comm %q exe %q: the exact values are lost", p.Comm, p.Exe)
	}
	var evilPC string
	for _, th := range p.Threads {
		for _, f := range th.Frames {
			if f.Fn() == evilFunc {
				evilPC = f.PC
			}
		}
	}
	if evilPC == "" {
		t.Fatalf("no frame named %q in the json dump:\n%s", evilFunc, js)
	}

	sym, errOut, code := runSS(t, "symbolize", "-p", pid, evilPC)
	if code != 0 {
		t.Fatalf("symbolize: exit %d: %s", code, errOut)
	}
	noRawControls(t, "symbolize", sym)
	if !strings.Contains(sym, `evil\x1b[2J\x1b]0;owned\x07fn`) {
		t.Errorf("symbolize %s: %q", evilPC, sym)
	}
}

// record's folded and text profiles of an on-CPU thread in a renamed
// function print no raw control either.
func TestHostileNamesRecord(t *testing.T) {
	exe := buildHostile(t)
	tg := testutil.Start(t, exe, "spin")
	for _, format := range []string{"folded", "text"} {
		out, errOut, code := runSS(t, "record", "-d", "300ms", "--format", format, fmt.Sprint(tg.PID))
		if code != 0 {
			t.Fatalf("record --format %s: exit %d: %s", format, code, errOut)
		}
		noRawControls(t, "record "+format, out)
		noRawControls(t, "record "+format+" (stderr)", errOut)
		if !strings.Contains(out, "spin") || !strings.Contains(out, "2Jfn") {
			t.Errorf("record --format %s does not show the spinning function:\n%s", format, out)
		}
	}
}
