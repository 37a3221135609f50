package output

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"stackshot/internal/term"
	"stackshot/report"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds what the profile writers share: how a frame is named in
// folded stacks (and so in the SVG and the text report), how a sample becomes
// a root-first list of names, and how a format is chosen.

// frameKind classifies a flame-graph box for colouring.
type frameKind uint8

const (
	kindUser    frameKind = iota // a named user-space function
	kindInlined                  // a named function inlined into its caller
	kindKernel                   // a kernel function
	kindUnknown                  // no function name: module+0xoffset or [unknown]
	kindRoot                     // the process (and thread) at the bottom
)

// kernelSuffix marks kernel frames in folded stacks, as perf's
// stackcollapse-perf.pl does, so flame-graph tools colour them apart.
const kernelSuffix = "_[k]"

// sanitizeName makes s safe as one folded-stack element and as XML text:
// ';' (the folded separator) becomes ':', and cleanText's rules apply.
func sanitizeName(s string) string { return cleanText(s, true) }

// cleanText makes target-controlled text safe for any output: characters
// a terminal acts on (term.Unsafe: controls, newlines above all, and
// bidirectional overrides) become spaces, invalid UTF-8 and the
// non-characters U+FFFE/U+FFFF become U+FFFD, and with semi ';' becomes ':'.
func cleanText(s string, semi bool) string {
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c == ';' && semi) || c < 0x20 || c == 0x7f || c >= utf8.RuneSelf {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		switch {
		case r == ';' && semi:
			return ':'
		case term.Unsafe(r):
			return ' '
		case r == 0xFFFE || r == 0xFFFF:
			return '\uFFFD'
		}
		return r
	}, s)
}

// moduleName is the short name of a frame's module: the base name of a path,
// the whole pseudo-name otherwise ("[vdso]", "[anon:jit]").
func moduleName(m string) string {
	if strings.HasPrefix(m, "/") {
		return filepath.Base(m)
	}
	return m
}

// frameName is the name of one frame in folded stacks, the SVG and the text
// report, with its kind:
//   - a named function is its (demangled) name; kernel functions get "_[k]";
//   - the kernel's sigreturn trampoline is "<signal handler called>";
//   - an unknown user function is "module+0xoffset" (module base name and the
//     address in the module's ELF address space), or the module's name alone
//     when the offset is not known, or "[unknown]" without a module;
//   - an unknown kernel function is "0xADDRESS_[k]", or "[unknown]_[k]".
func frameName(f *report.Frame) (string, frameKind) {
	if f.Kind == "kernel" {
		if f.Function != "" {
			return sanitizeName(f.Function) + kernelSuffix, kindKernel
		}
		if f.PC != 0 {
			return "0x" + strconv.FormatUint(f.PC, 16) + kernelSuffix, kindKernel
		}
		return "[unknown]" + kernelSuffix, kindKernel
	}
	switch {
	case f.SignalFrame:
		return "<signal handler called>", kindUser
	case f.Function != "":
		if f.Inlined {
			return sanitizeName(f.Function), kindInlined
		}
		return sanitizeName(f.Function), kindUser
	}
	return unknownName(f), kindUnknown
}

// unknownName names a user frame whose function is not known.
func unknownName(f *report.Frame) string {
	switch {
	case f.Module != "" && f.HasModule:
		return sanitizeName(moduleName(f.Module)) + "+0x" + strconv.FormatUint(f.ModuleOffset, 16)
	case f.Module != "":
		return sanitizeName(moduleName(f.Module))
	}
	return "[unknown]"
}

// profileIndex looks processes up by pid.
type profileIndex map[int]*ProfileProcess

func indexProcesses(p *Profile) profileIndex {
	ix := make(profileIndex, len(p.Processes))
	for i := range p.Processes {
		ix[p.Processes[i].PID] = &p.Processes[i]
	}
	return ix
}

// comm is the root name of a process: its comm, or "pid N" when the profile
// does not name it.
func (ix profileIndex) comm(pid int) string {
	if pr := ix[pid]; pr != nil && pr.Comm != "" {
		return sanitizeName(pr.Comm)
	}
	return "pid " + strconv.Itoa(pid)
}

// threadRoot is the name of a thread's root box under --per-thread.
func threadRoot(s *Sample) string {
	if s.Thread != "" {
		return sanitizeName(s.Thread)
	}
	return "tid " + strconv.Itoa(s.TID)
}

// foldedStack is one line of folded output: names root first, their kinds,
// and the summed count.
type foldedStack struct {
	names []string
	kinds []frameKind
	text  string // names joined with ';'
	count int64
}

// foldStacks turns the profile's samples into folded stacks, root first,
// merging samples whose text is identical and sorting by text.
//
// The root is the process's comm: processes with the same comm (two workers
// of one server) merge into one tree, which is what a flame graph of a
// service wants; pprof and JSON keep pids apart. With PerThread the thread
// name comes next, so threads with the same name (a pool's workers) merge
// too. Samples with no count are left out; a sample with no frames keeps
// just its root, so its samples still show.
func foldStacks(p *Profile) []foldedStack {
	ix := indexProcesses(p)
	byText := make(map[string]int, len(p.Samples))
	var out []foldedStack
	var b strings.Builder
	for i := range p.Samples {
		s := &p.Samples[i]
		if s.Count <= 0 {
			continue
		}
		n := len(s.Frames) + 1
		if p.PerThread {
			n++
		}
		names := make([]string, 0, n)
		kinds := make([]frameKind, 0, n)
		names = append(names, ix.comm(s.PID))
		kinds = append(kinds, kindRoot)
		if p.PerThread {
			names = append(names, threadRoot(s))
			kinds = append(kinds, kindRoot)
		}
		for j := len(s.Frames) - 1; j >= 0; j-- {
			name, kind := frameName(&s.Frames[j])
			names = append(names, name)
			kinds = append(kinds, kind)
		}
		b.Reset()
		for j, name := range names {
			if j > 0 {
				b.WriteByte(';')
			}
			b.WriteString(name)
		}
		text := b.String()
		if k, ok := byText[text]; ok {
			out[k].count += s.Count
			continue
		}
		byText[text] = len(out)
		out = append(out, foldedStack{names: names, kinds: kinds, text: text, count: s.Count})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].text < out[j].text })
	return out
}

// WriteProfile writes p in one of the formats of ProfileFormats; top is the
// number of stacks and functions the text format lists.
func WriteProfile(w io.Writer, p *Profile, format string, top int) error {
	switch format {
	case "folded":
		return WriteFolded(w, p)
	case "pprof":
		return WritePprof(w, p)
	case "svg":
		return WriteSVG(w, p)
	case "json":
		return WriteProfileJSON(w, p)
	case "text":
		return WriteProfileText(w, p, top)
	}
	return fmt.Errorf("unknown profile format %q (want %s)", format, formatList())
}

func formatList() string {
	names := make([]string, 0, len(ProfileFormats))
	for k := range ProfileFormats {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// FormatFor chooses the profile format: format when given (it must be a key
// of ProfileFormats), else the one whose extension ends path (the longest
// matching extension wins, case-insensitively, so ".pb.gz" beats any
// shorter one), else "folded" (also for stdout, path "" or "-").
func FormatFor(path, format string) (string, error) {
	if format != "" {
		f := strings.ToLower(format)
		if _, ok := ProfileFormats[f]; !ok {
			return "", fmt.Errorf("unknown profile format %q (want %s)", format, formatList())
		}
		return f, nil
	}
	base := strings.ToLower(filepath.Base(path))
	best, bestLen := "folded", 0
	for f, exts := range ProfileFormats {
		for _, e := range exts {
			e = strings.ToLower(e)
			// Longest wins; ties (none today) broken by name for stability.
			if strings.HasSuffix(base, e) && len(base) > len(e) &&
				(len(e) > bestLen || (len(e) == bestLen && f < best)) {
				best, bestLen = f, len(e)
			}
		}
	}
	return best, nil
}
