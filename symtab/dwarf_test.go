package symtab

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// a2lFrame is one function/location pair addr2line prints.
type a2lFrame struct {
	fn   string
	file string
	line int
}

// runAddr2line resolves pcs with `addr2line -a -f -i [-C] -e file`, fed on
// stdin, and returns the frames per pc, innermost first.
func runAddr2line(t testing.TB, file string, demangle bool, pcs []uint64) [][]a2lFrame {
	t.Helper()
	args := []string{"-a", "-f", "-i"}
	if demangle {
		args = append(args, "-C")
	}
	args = append(args, "-e", file)
	var in bytes.Buffer
	for _, pc := range pcs {
		fmt.Fprintf(&in, "%#x\n", pc)
	}
	cmd := exec.Command("addr2line", args...)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("addr2line: %v", err)
	}
	var res [][]a2lFrame
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var cur []a2lFrame
	var pending string
	havePending := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "0x") && !havePending {
			if _, err := strconv.ParseUint(line[2:], 16, 64); err == nil {
				if len(res) > 0 || cur != nil {
					res = append(res, cur)
				}
				cur = []a2lFrame{}
				continue
			}
		}
		if !havePending {
			pending, havePending = line, true
			continue
		}
		havePending = false
		loc := line
		if i := strings.Index(loc, " (discriminator"); i >= 0 {
			loc = loc[:i]
		}
		f := a2lFrame{fn: pending}
		if i := strings.LastIndexByte(loc, ':'); i >= 0 {
			f.file = loc[:i]
			f.line, _ = strconv.Atoi(loc[i+1:])
		}
		if f.fn == "??" {
			f.fn = ""
		}
		if f.file == "??" {
			f.file = ""
		}
		cur = append(cur, f)
	}
	if cur != nil {
		res = append(res, cur)
	}
	if len(res) != len(pcs) {
		t.Fatalf("addr2line answered %d addresses, asked %d", len(res), len(pcs))
	}
	return res
}

// fromSyms turns our answer into addr2line's shape.
func fromSyms(syms []Sym) []a2lFrame {
	var r []a2lFrame
	for _, s := range syms {
		r = append(r, a2lFrame{fn: s.Function, file: s.File, line: s.Line})
	}
	if len(r) == 0 {
		r = []a2lFrame{{}}
	}
	return r
}

func framesEqual(a, b []a2lFrame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// funcPCs returns every byte address of the sized functions nm lists whose
// (demangled) name passes keep.
func funcPCs(t testing.TB, file string, keep func(string) bool) []uint64 {
	var pcs []uint64
	for _, s := range runNM(t, file, true) {
		if !isFuncType(s.typ) || !s.hasSize || !keep(s.name) {
			continue
		}
		for pc := s.addr; pc < s.addr+s.size; pc++ {
			pcs = append(pcs, pc)
		}
	}
	return pcs
}

// compareWithAddr2line resolves pcs both ways and reports differences.
func compareWithAddr2line(t *testing.T, m *Module, file string, demangle bool, pcs []uint64) {
	t.Helper()
	want := runAddr2line(t, file, demangle, pcs)
	bad := 0
	for i, pc := range pcs {
		got := fromSyms(m.Lookup(pc, nil))
		if !framesEqual(got, want[i]) {
			bad++
			if bad <= 400 {
				t.Errorf("%#x: got %+v\n\taddr2line %+v", pc, got, want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d addresses differ from addr2line", bad, len(pcs))
	}
}

func cxxDebug(t testing.TB, variant string) string {
	skipWithout(t, "g++", "nm", "addr2line")
	if variant == "zstd" {
		// gcc 12 has no -gz=zstd; objcopy compresses the sections.
		skipWithout(t, "objcopy")
		return artifact(t, "cxxprog-zstd", sh("g++ -O2 -g -o $OUT.tmp $SRC/cxxprog.cc && objcopy --compress-debug-sections=zstd $OUT.tmp $OUT"))
	}
	flags := map[string][]string{
		"dwarf5":      {"-gdwarf-5"},
		"dwarf4":      {"-gdwarf-4"},
		"gz-zlib":     {"-gdwarf-5", "-gz=zlib"},
		"gz-zlib-gnu": {"-gdwarf-4", "-gz=zlib-gnu"}, // legacy .zdebug_* sections
		"O0-dwarf4":   {"-gdwarf-4", "-O0"},
	}[variant]
	args := append([]string{"g++", "-O2", "-g"}, flags...)
	args = append(args, "-o", "$OUT", "$SRC/cxxprog.cc")
	return artifact(t, "cxxprog-"+variant, args)
}

// TestDWARFMatchesAddr2line resolves every byte of every function of the
// C++ target and expects what `addr2line -f -i -C` says: names, files,
// lines, and the inlined frames.
func TestDWARFMatchesAddr2line(t *testing.T) {
	for _, variant := range []string{"dwarf5", "dwarf4", "gz-zlib", "gz-zlib-gnu", "zstd", "O0-dwarf4"} {
		t.Run(variant, func(t *testing.T) {
			bin := cxxDebug(t, variant)
			s := New(Options{})
			defer s.Close()
			m := openFileModule(t, s, bin)
			if src := m.SymbolSources(); len(src) == 0 || src[0] != "dwarf" {
				t.Fatalf("sources = %v, want dwarf first", src)
			}
			pcs := funcPCs(t, bin, func(string) bool { return true })
			if len(pcs) < 200 {
				t.Fatalf("only %d pcs", len(pcs))
			}
			compareWithAddr2line(t, m, bin, true, pcs)
		})
	}
}

// TestInlineFrame checks the inlined function by itself: in
// calls_inline's code there must be pcs where leaf_inline is the innermost
// frame, inlined into calls_inline at a line of cxxprog.cc that calls it.
func TestInlineFrame(t *testing.T) {
	bin := cxxDebug(t, "dwarf5")
	s := New(Options{})
	defer s.Close()
	m := openFileModule(t, s, bin)
	src, err := exec.Command("grep", "-n", "leaf_inline(", srcDir(t)+"/cxxprog.cc").Output()
	if err != nil {
		t.Fatal(err)
	}
	callLines := map[int]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(src)), "\n") {
		n, _ := strconv.Atoi(strings.SplitN(l, ":", 2)[0])
		if !strings.Contains(l, "int leaf_inline") {
			callLines[n] = true
		}
	}
	sym := nmFind(t, runNM(t, bin, true), "outer::inner::calls_inline(int)")
	found := 0
	for pc := sym.addr; pc < sym.addr+sym.size; pc++ {
		f := m.Lookup(pc, nil)
		if len(f) == 2 && f[0].Function == "outer::inner::leaf_inline(int)" && f[0].Inlined {
			found++
			if f[1].Function != "outer::inner::calls_inline(int)" || f[1].Inlined || !callLines[f[1].Line] ||
				!strings.HasSuffix(f[1].File, "cxxprog.cc") || f[1].Offset != pc-sym.addr {
				t.Errorf("%#x: caller frame %+v, want calls_inline at one of lines %v, offset %#x", pc, f[1], callLines, pc-sym.addr)
			}
		}
	}
	if found == 0 {
		t.Error("no pc of calls_inline has leaf_inline as an inlined frame")
	}
}
