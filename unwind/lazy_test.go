package unwind

import (
	"debug/elf"
	"math/bits"
	"os"
	"testing"

	"stackshot/internal/safeelf"
)

// sameRules reports whether two rows give the same rules: CFA, every
// register, the signal flag, and for expression rules the same expression
// bytes (each row indexes its own table's pool).
func sameRules(a, b Row) bool {
	if a.Signal != b.Signal {
		return false
	}
	same := func(x, y Rule) bool {
		switch x.Kind {
		case RuleExpr, RuleValExpr, RuleCFAExpr:
			return y.Kind == x.Kind && string(a.Expr(x)) == string(b.Expr(y))
		}
		return x == y
	}
	if !same(a.CFA, b.CFA) {
		return false
	}
	for r := range a.Regs {
		if !same(a.Regs[r], b.Regs[r]) {
			return false
		}
	}
	return true
}

// compareLazy looks every address of every executable section of path up
// in the lazy table and in the compiled one: both must find a row or
// neither, with the same rules. The lazy row may be narrower (it stops at
// its FDE's end where the compiled table merges equal rows of adjacent
// FDEs) but never reaches outside the compiled row.
// wantLazy says whether the file has the search table a lazy table needs.
func compareLazy(t *testing.T, path string, wantLazy bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	full, err := LoadTable(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := LoadTableLazy(nil, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lazy.Lazy() != wantLazy {
		t.Fatalf("%s: lazy table %v, want %v", path, lazy.Lazy(), wantLazy)
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		t.Fatal(err)
	}
	addrs, found, mismatches := 0, 0, 0
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Type != elf.SHT_PROGBITS {
			continue
		}
		for pc := s.Addr; pc < s.Addr+s.Size; pc++ {
			addrs++
			want, wok := full.Find(pc)
			got, gok := lazy.Find(pc)
			if wok != gok || wok && (!sameRules(want, got) || got.Addr < want.Addr || got.End > want.End) {
				if mismatches++; mismatches <= 10 {
					t.Errorf("%s %s %#x: compiled %v %q, lazy %v %q", path, s.Name, pc, wok, want, gok, got)
				}
				continue
			}
			if wok {
				found++
			}
		}
	}
	if lazy.Lazy() {
		t.Logf("%s: %d addresses, %d with a row, %d FDEs compiled lazily of %d, %d mismatches",
			path, addrs, found, len(lazy.lazy.fdes), lazy.Len(), mismatches)
	}
	if found == 0 {
		t.Fatal("no address had a row")
	}
}

// TestLazyMatchesCompiled: the table a one-off dump uses (LoadTableLazy:
// one FDE found through .eh_frame_hdr and compiled on first use) answers
// what the whole compiled table answers, at every address of the code of
// libc, libstdc++, the vdso, a C target (dynamic, and static: no .eh_frame_hdr, so
// compiled whole) and a C++ target with landing pads ("zPLR" CIEs).
func TestLazyMatchesCompiled(t *testing.T) {
	needLinuxAmd64(t)
	t.Run("libc", func(t *testing.T) {
		_, err := os.Stat(libcPath)
		skipUnless(t, err == nil, libcPath+" is missing")
		compareLazy(t, libcPath, true)
	})
	t.Run("libstdc++", func(t *testing.T) {
		const p = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
		_, err := os.Stat(p)
		skipUnless(t, err == nil, p+" is missing (g++ installs it)")
		compareLazy(t, p, true)
	})
	t.Run("vdso", func(t *testing.T) {
		img := selfVDSO()
		skipUnless(t, img != nil, "no [vdso] in this process")
		p := t.TempDir() + "/vdso.so"
		if err := os.WriteFile(p, img, 0o600); err != nil {
			t.Fatal(err)
		}
		compareLazy(t, p, true)
	})
	t.Run("O2", func(t *testing.T) {
		compareLazy(t, buildTarget(t, "gcc", "target.c", cFlagsO2...), true)
	})
	t.Run("static", func(t *testing.T) {
		// A static glibc binary has no .eh_frame_hdr: the whole table.
		compareLazy(t, buildTarget(t, "gcc", "target.c", append([]string{"-static"}, cFlagsO2...)...), false)
	})
	t.Run("cxx", func(t *testing.T) {
		compareLazy(t, buildTarget(t, "g++", "throw.cc", "-O2", "-fomit-frame-pointer", "-g"), true)
	})
}

// TestLazyConcurrent: a lazy table compiles FDEs on first use behind a
// lock; lookups from several goroutines (run with -race) agree with the
// compiled table.
func TestLazyConcurrent(t *testing.T) {
	needLinuxAmd64(t)
	f, err := os.Open(libcPath)
	skipUnless(t, err == nil, libcPath+" is missing")
	defer f.Close()
	full, err := LoadTable(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := LoadTableLazy(nil, f, nil)
	if err != nil || !lazy.Lazy() {
		t.Fatalf("lazy table: %v %v", err, lazy.Lazy())
	}
	var pcs []uint64
	full.Rows(func(r Row) bool {
		pcs = append(pcs, r.Addr)
		return len(pcs) < 4000
	})
	done := make(chan int)
	for g := range 4 {
		go func() {
			bad := 0
			for i := g; i < len(pcs); i += 3 {
				want, _ := full.Find(pcs[i])
				if got, ok := lazy.Find(pcs[i]); !ok || !sameRules(want, got) {
					bad++
				}
			}
			done <- bad
		}()
	}
	for range 4 {
		if bad := <-done; bad > 0 {
			t.Errorf("%d lookups differ from the compiled table", bad)
		}
	}
}

// TestLazyReadsLittle: a lazy table reads .eh_frame page by page as FDEs
// are compiled; one lookup in libc reads a few pages of it, and its row is
// the compiled table's.
func TestLazyReadsLittle(t *testing.T) {
	needLinuxAmd64(t)
	_, err := os.Stat(libcPath)
	skipUnless(t, err == nil, libcPath+" is missing")
	f, err := os.Open(libcPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lazy, err := LoadTableLazy(nil, f, nil)
	if err != nil || !lazy.Lazy() {
		t.Fatalf("lazy table: %v", err)
	}
	full, err := LoadTable(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		t.Fatal(err)
	}
	text := ef.Section(".text")
	if text == nil {
		t.Fatal("libc has no .text")
	}
	pc := text.Addr + text.Size/2
	got, gok := lazy.Find(pc)
	want, wok := full.Find(pc)
	if gok != wok || gok && !sameRules(got, want) {
		t.Errorf("row at %#x: lazy %v %+v, compiled %v %+v", pc, gok, got, wok, want)
	}
	l := lazy.lazy
	if l.src == nil {
		t.Fatal(".eh_frame was read whole")
	}
	pages, read := (len(l.sec.data)+lazyPage-1)/lazyPage, 0
	for _, w := range l.filled {
		read += bits.OnesCount64(w)
	}
	if read == 0 || read > 4 {
		t.Errorf("%d of .eh_frame's %d pages read for one lookup", read, pages)
	}
}

// A reader that carries its parsed headers (safeelf.Parsed, what symtab
// hands resolve) is not parsed again, and loads the same table, giving
// back to the budget all it took.
func TestLoadFromParsed(t *testing.T) {
	f, err := os.Open(libcPath)
	skipUnless(t, err == nil, libcPath+" is missing")
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	budget := safeelf.NewBudget(0, 0)
	sf, err := safeelf.Open(f, st.Size(), budget)
	if err != nil {
		t.Fatal(err)
	}
	l := &loader{b: budget}
	if got, err := l.open(sf); err != nil || got.File != sf.File || l.taken != 0 {
		t.Fatalf("parsed again: %v, same parse %v, charged %d", err, got != nil && got.File == sf.File, l.taken)
	}
	used := budget.Used()
	parsed, err := LoadTableLazy(nil, sf, budget)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := LoadTableLazy(nil, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := sf.Section(".text")
	if text == nil {
		t.Fatal("libc has no .text")
	}
	found := 0
	for pc := text.Addr; pc < text.Addr+text.Size; pc += 97 {
		want, wok := plain.Find(pc)
		got, gok := parsed.Find(pc)
		if wok != gok || wok && !sameRules(want, got) {
			t.Fatalf("%#x: from the parse %v %v, from the file %v %v", pc, gok, got, wok, want)
		}
		if wok {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no address had a row")
	}
	if budget.Used() < used {
		t.Errorf("the budget was given back more than was taken: %d < %d", budget.Used(), used)
	}
}
