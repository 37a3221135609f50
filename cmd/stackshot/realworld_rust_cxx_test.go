//go:build linux

package main

// Real-world tests: Rust and C++ programs, names checked against nm.

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

type nmSym struct {
	addr, size uint64
	raw, dem   string
}

// nmSymbols reads a binary's defined function symbols with nm, both raw and
// demangled by binutils (symbol-table order, so the two listings align).
func nmSymbols(t testing.TB, bin string) []nmSym {
	t.Helper()
	testutil.Need(t, "nm")
	parse := func(args ...string) [][]string {
		out, err := exec.Command("nm", append(args, bin)...).Output()
		if err != nil {
			t.Fatalf("nm %v: %v", args, err)
		}
		var rows [][]string
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.SplitN(l, " ", 4)
			if len(f) == 4 {
				rows = append(rows, f)
			}
		}
		return rows
	}
	raw := parse("-p", "-S", "--defined-only")
	dem := parse("-p", "-S", "-C", "--defined-only")
	if len(raw) != len(dem) {
		t.Fatalf("nm listings differ in length: %d vs %d", len(raw), len(dem))
	}
	var out []nmSym
	for i := range raw {
		if typ := strings.ToLower(raw[i][2]); typ != "t" && typ != "w" {
			continue
		}
		a, _ := strconv.ParseUint(raw[i][0], 16, 64)
		s, _ := strconv.ParseUint(raw[i][1], 16, 64)
		out = append(out, nmSym{addr: a, size: s, raw: raw[i][3], dem: dem[i][3]})
	}
	return out
}

var rustHash = regexp.MustCompile(`::h[0-9a-f]{16}$`)

func TestRealRust(t *testing.T) {
	testutil.Need(t, "rustc")
	bin := testutil.Build(t, "rustc", []string{realSrc("threads.rs")}, "-O", "-g")
	tg := testutil.Start(t, bin)
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	if len(p.Threads) != 4 {
		t.Fatalf("want 4 threads, got %d", len(p.Threads))
	}
	main := p.Threads[0]
	assertMainChain(t, main)
	if f := fnames(main); !hasSubseq(f, []string{"threads::main_wait", "threads::main", "main", "_start"}) {
		t.Errorf("main thread: want threads::main_wait ... threads::main ... main ... _start in %v", f)
	}
	for name, chain := range map[string][]string{
		"receiver": {"threads::recv_b", "threads::recv_a"},
		"sleeper":  {"threads::sleep_b", "threads::sleep_a"},
		"panicker": {"threads::sleep_b", "<threads::Guard as core::ops::drop::Drop>::drop", "threads::panicker"},
	} {
		th := threadByName(t, p, name)
		f := fnames(th)
		if !hasSubseq(f, chain) || !endsInThreadRoot(f) {
			t.Errorf("%s: want %v in order, then start_thread, clone3: %v (stop %q)", name, chain, f, th.Stop)
		}
		if th.Error != nil {
			t.Errorf("%s: error %q", name, *th.Error)
		}
	}
	assertUntouched(t, tg.PID, false)
}

// TestRealRustNamesMatchNm: every frame in the Rust binary whose symbol is
// legacy-mangled (_ZN...) carries the name binutils demangles it to (nm -C),
// without the hash. Catches names taken from the wrong address (load bias)
// and demangler slips (e.g. "__rust_begin_short_backtrace").
func TestRealRustNamesMatchNm(t *testing.T) {
	testutil.Need(t, "rustc")
	bin := testutil.Build(t, "rustc", []string{realSrc("threads.rs")}, "-O", "-g")
	syms := nmSymbols(t, bin)
	sort.Slice(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	find := func(a uint64) *nmSym {
		// Aliases share an address; look at the few symbols at or below a.
		i := sort.Search(len(syms), func(i int) bool { return syms[i].addr > a }) - 1
		for n := 0; i >= 0 && n < 8; i, n = i-1, n+1 {
			if a < syms[i].addr+syms[i].size {
				return &syms[i]
			}
		}
		return nil
	}
	tg := testutil.Start(t, bin)
	p := dumpJSON(t, "--mode", "stop", strconv.Itoa(tg.PID))
	checked := 0
	for _, th := range p.Threads {
		k := 0
		for _, f := range th.Frames {
			if f.Kind != "user" || f.Inlined {
				continue
			}
			k++
			if f.Module != bin {
				continue
			}
			off, err := strconv.ParseUint(strings.TrimPrefix(f.ModuleOffset, "0x"), 16, 64)
			if err != nil {
				t.Errorf("bad module_offset %q", f.ModuleOffset)
				continue
			}
			look := off
			if k > 1 && f.Method != "signal" {
				look--
			}
			s := find(look)
			if s == nil || !strings.HasPrefix(s.raw, "_ZN") {
				continue
			}
			want := rustHash.ReplaceAllString(s.dem, "")
			checked++
			if f.Fn() != want {
				t.Errorf("thread %q: frame at %s+%#x: function %q, nm -C says %q (%s)", th.Name, filepath.Base(bin), off, f.Fn(), want, s.raw)
			}
		}
	}
	if checked < 5 {
		t.Errorf("only %d frames had legacy-mangled symbols; expected the std backtrace frames of every thread", checked)
	}
}

// TestRealCxx: C++ at -O2 with templates, lambdas, std::function and a wait
// reached inside a catch handler.
func TestRealCxx(t *testing.T) {
	tg := testutil.Start(t, testutil.Build(t, "g++", []string{realSrc("cxx.cc")}, "-O2", "-g", "-pthread"))
	p := dumpJSON(t, strconv.Itoa(tg.PID))
	if len(p.Threads) != 3 {
		t.Fatalf("want 3 threads, got %d", len(p.Threads))
	}
	assertMainChain(t, p.Threads[0], "app::Box<double>::wait(int)", "main")
	lam := threadByName(t, p, "lambda")
	if f := fnames(lam); !hasSubseq(f, []string{"app::Box<int>::wait(int)", "start_thread"}) || !endsInThreadRoot(f) {
		t.Errorf("lambda: %v", f)
	}
	assertThreadChain(t, threadByName(t, p, "catcher"), "app::Box<long>::wait(int)", "app::in_catch(int)")
	// -s: file:line from DWARF, as addr2line gives it for the same address.
	for _, f := range threadByName(t, p, "catcher").Frames {
		if f.Fn() == "app::in_catch(int)" && !f.Inlined {
			if filepath.Base(f.File) != "cxx.cc" || f.Line == 0 {
				t.Errorf("in_catch frame: file %q line %d", f.File, f.Line)
			}
		}
	}
	assertUntouched(t, tg.PID, false)
}
