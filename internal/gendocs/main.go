// Command gendocs writes stackshot's man page and its bash and zsh
// completion from the help the binary prints ('stackshot help' and
// 'stackshot help COMMAND'), so that neither can say other things than
// the binary does:
//
//	go run ./internal/gendocs bin/stackshot docs
//
// writes docs/stackshot.1, docs/completion/stackshot.bash and
// docs/completion/_stackshot (make docs). Its test checks that the
// committed files are what the current binary's help makes.
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/gendocs STACKSHOT-BINARY DOCS-DIR")
		os.Exit(2)
	}
	h, err := Read(os.Args[1])
	if err == nil {
		err = Write(h, os.Args[2])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

// Files are the generated files, by their path under the docs directory.
func Files(h *Help) map[string][]byte {
	return map[string][]byte{
		"stackshot.1":               Man(h),
		"completion/stackshot.bash": Bash(h),
		"completion/_stackshot":     Zsh(h),
	}
}

// Write writes the generated files under dir.
func Write(h *Help, dir string) error {
	for name, b := range Files(h) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Help is what the binary's help says.
type Help struct {
	Title    string    // "what every thread of a live process is doing"
	Usage    []Usage   // the overview's usage lines
	Text     []string  // the overview's other paragraphs
	Commands []Command // each command with a page of its own
}

// Usage is one line of the overview's usage: a synopsis and what it does.
type Usage struct{ Synopsis, What string }

// Command is a command's help page.
type Command struct {
	Name     string
	Synopsis string   // its usage line
	Text     []string // paragraphs
	Flags    []Flag
	Examples []string
}

// Flag is one line of a command's flags.
type Flag struct {
	Short, Long string
	Value       string // the value's type ("" for a boolean)
	Usage       string
}

// Read runs bin's help and parses it.
func Read(bin string) (*Help, error) {
	out, err := exec.Command(bin, "help").Output()
	if err != nil {
		return nil, fmt.Errorf("%s help: %v", bin, err)
	}
	h := parseOverview(string(out))
	seen := map[string]bool{}
	for _, u := range h.Usage {
		f := strings.Fields(u.Synopsis)
		if len(f) < 2 || seen[f[1]] || !regexp.MustCompile(`^[a-z]+$`).MatchString(f[1]) {
			continue
		}
		seen[f[1]] = true
		page, err := exec.Command(bin, "help", f[1]).Output()
		if err != nil || !strings.HasPrefix(string(page), "usage:") {
			continue // (version: no page of its own)
		}
		c, err := parseCommand(f[1], string(page))
		if err != nil {
			return nil, err
		}
		h.Commands = append(h.Commands, c)
	}
	if len(h.Commands) == 0 {
		return nil, fmt.Errorf("%s help names no command with a page", bin)
	}
	return h, nil
}

// paragraphs splits text at blank lines, each paragraph's lines joined
// with newlines.
func paragraphs(text string) []string {
	var ps []string
	for _, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if p = strings.Trim(p, "\n"); p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

var twoSpaces = regexp.MustCompile(`\s{2,}`)

func parseOverview(s string) *Help {
	h := &Help{}
	ps := paragraphs(s)
	for i, p := range ps {
		switch {
		case i == 0 && strings.HasPrefix(p, "stackshot:"):
			h.Title = strings.TrimSpace(strings.TrimPrefix(p, "stackshot:"))
		case strings.HasPrefix(p, "usage:"):
			for _, l := range strings.Split(p, "\n")[1:] {
				parts := twoSpaces.Split(strings.TrimSpace(l), 2)
				u := Usage{Synopsis: parts[0]}
				if len(parts) == 2 {
					u.What = parts[1]
				}
				h.Usage = append(h.Usage, u)
			}
		default:
			h.Text = append(h.Text, p)
		}
	}
	return h
}

var flagLine = regexp.MustCompile(`^\s+(?:-(\w), )?--([\w-]+)(?:\[=[^\]]*\])?(?: (\w+))?\s{2,}(.*)$`)

func parseCommand(name, page string) (Command, error) {
	c := Command{Name: name}
	head, rest, _ := strings.Cut(page, "\nflags:\n")
	flags, examples, _ := strings.Cut(rest, "\nexamples:\n")
	ps := paragraphs(strings.TrimPrefix(head, "usage:"))
	if len(ps) == 0 {
		return c, fmt.Errorf("help %s: no usage line", name)
	}
	c.Synopsis, c.Text = strings.TrimSpace(ps[0]), ps[1:]
	for _, l := range strings.Split(flags, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		m := flagLine.FindStringSubmatch(l)
		switch {
		case m != nil:
			c.Flags = append(c.Flags, Flag{Short: m[1], Long: m[2], Value: m[3], Usage: m[4]})
		case len(c.Flags) > 0: // a wrapped description
			c.Flags[len(c.Flags)-1].Usage += " " + strings.TrimSpace(l)
		default:
			return c, fmt.Errorf("help %s: a flag line that is not one: %q", name, l)
		}
	}
	for _, l := range strings.Split(examples, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			c.Examples = append(c.Examples, l)
		}
	}
	return c, nil
}

var choiceList = regexp.MustCompile(`^([a-z]+(?:, [a-z]+)* or [a-z]+)\b`)

// Choices are the values a flag's usage lists ("capture: auto, stop or
// nostop"), or nil.
func (f Flag) Choices() []string {
	u := regexp.MustCompile(` \([^)]*\)`).ReplaceAllString(f.Usage, "")
	i := strings.LastIndex(u, ": ")
	if f.Value == "" || i < 0 {
		return nil
	}
	m := choiceList.FindString(u[i+2:])
	if m == "" {
		return nil
	}
	return strings.Fields(strings.NewReplacer(",", "", " or ", " ").Replace(m))
}

// Kind says what a flag's value completes to: "pid", "file", "dir",
// "choice" or "" (nothing).
func (f Flag) Kind() string {
	switch {
	case f.Value == "id" || f.Value == "PID" || f.Long == "pid":
		return "pid"
	case f.Choices() != nil:
		return "choice"
	case f.Long == "debug-dir" || f.Long == "sysroot" || f.Long == "spool":
		return "dir"
	case f.Long == "output" || f.Long == "perf-map" || f.Long == "exe":
		return "file"
	}
	return ""
}

// Operand says what a command's arguments complete to: "pid", "file" or "".
func (c Command) Operand() string {
	switch {
	case strings.Contains(c.Synopsis, "PID"):
		return "pid"
	case strings.Contains(c.Synopsis, "FILE..."):
		return "file"
	}
	return ""
}

func join(b *bytes.Buffer, format string, args ...any) { fmt.Fprintf(b, format, args...) }
