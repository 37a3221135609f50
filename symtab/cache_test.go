//go:build linux

package symtab

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
	"testing"

	"stackshot/internal/diskcache"
)

// resolveAll resolves pcs in path with a fresh Symbolizer using cache
// (nil: none), every logical frame of every pc.
func resolveAll(t *testing.T, cache *diskcache.Cache, namesOnly bool, path string, pcs []uint64) [][]Sym {
	t.Helper()
	o := Options{NamesOnly: namesOnly}
	if cache != nil {
		o.Cache = cache
	}
	s := New(o)
	defer s.Close()
	m := openFileModule(t, s, path)
	out := make([][]Sym, len(pcs))
	for i, pc := range pcs {
		out[i] = m.Lookup(pc, nil)
	}
	return out
}

// damage changes every entry of the cache in dir one way.
func damage(t *testing.T, dir, how string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Name()[0] == '.' {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n++
		switch how {
		case "flip":
			b[len(b)/2] ^= 0x55
			os.WriteFile(p, b, 0o600)
		case "truncate":
			os.WriteFile(p, b[:len(b)*2/3], 0o600)
		case "symlink":
			// Each entry a symlink to another entry: a good file, of the
			// wrong key, reached through a link.
			other := filepath.Join(dir, ents[(len(ents)+n)%len(ents)].Name())
			os.Remove(p)
			os.Symlink(other, p)
		case "wrong-build-id":
			// The entry under another entry's name: valid, but not its key.
			other := filepath.Join(dir, ents[(n+1)%len(ents)].Name())
			ob, err := os.ReadFile(other)
			if err == nil && other != p {
				os.WriteFile(p, ob, 0o600)
			}
		default:
			t.Fatalf("unknown damage %q", how)
		}
	}
	return n
}

// TestCacheSameAnswers resolves every byte of a compressed-DWARF C++
// program and a sample of libc (through its separate debug file) without a
// cache, then cold, warm and with each kind of damaged cache: every answer
// must be the no-cache one, and the no-cache one is addr2line's.
func TestCacheSameAnswers(t *testing.T) {
	type target struct{ name, path string }
	var targets []target
	targets = append(targets, target{"cxx-gz-zlib", cxxDebug(t, "gz-zlib")}, target{"cxx-dwarf4", cxxDebug(t, "dwarf4")})
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err == nil {
		targets = append(targets, target{"libc", libc})
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			var pcs []uint64
			if tg.name == "libc" {
				for i, f := range runNM(t, tg.path, false, "-D") {
					if i%16 == 0 && isFuncType(f.typ) && f.hasSize && f.size > 0 {
						pcs = append(pcs, f.addr, f.addr+f.size/3, f.addr+f.size-1)
					}
				}
			} else {
				pcs = funcPCs(t, tg.path, func(string) bool { return true })
				compareWithAddr2line(t, openFileModule(t, New(Options{}), tg.path), tg.path, true, pcs)
			}
			if len(pcs) < 200 {
				t.Fatalf("only %d pcs", len(pcs))
			}
			want := resolveAll(t, nil, false, tg.path, pcs)
			wantNames := resolveAll(t, nil, true, tg.path, pcs)
			dir := filepath.Join(t.TempDir(), "cache")
			check := func(stage string) {
				t.Helper()
				c, err := diskcache.Open(dir, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				bad := 0
				for _, namesOnly := range []bool{true, false} {
					got, want := resolveAll(t, c, namesOnly, tg.path, pcs), want
					if namesOnly {
						want = wantNames
					}
					for i := range pcs {
						if !reflect.DeepEqual(got[i], want[i]) {
							if bad++; bad <= 10 {
								t.Errorf("%s (names only %v): %#x: got %+v, want %+v", stage, namesOnly, pcs[i], got[i], want[i])
							}
						}
					}
				}
				if bad > 0 {
					t.Fatalf("%s: %d of %d addresses differ from the no-cache run", stage, bad, len(pcs))
				}
			}
			check("cold")
			ents, _ := os.ReadDir(dir)
			if len(ents) < 2 {
				t.Fatalf("cold run left %d cache entries, want the index and units", len(ents))
			}
			check("warm")
			for _, how := range []string{"flip", "truncate", "symlink", "wrong-build-id"} {
				if n := damage(t, dir, how); n == 0 {
					t.Fatalf("%s: no entry to damage", how)
				}
				check("damaged " + how)
				check(fmt.Sprintf("rewritten after %s", how))
			}
		})
	}
}

// A warm run reads no debug section: the index and units come from the
// cache (the budget charged is only theirs, far less than the sections).
// The gc-sections target's line table holds the sequences of dropped
// functions, overlapping at address 0: its units once failed the cached
// entry's check and were decoded again on every warm run.
func TestCacheWarmSkipsSections(t *testing.T) {
	for _, name := range []string{"gz-zlib", "gc-sections"} {
		t.Run(name, func(t *testing.T) {
			var bin string
			if name == "gc-sections" {
				skipWithout(t, "g++")
				bin = artifact(t, "gcsections", sh("g++ -O2 -g -gdwarf-5 -ffunction-sections -Wl,--gc-sections -o $OUT $SRC/gcsections.cc"))
			} else {
				bin = cxxDebug(t, name)
			}
			pcs := funcPCs(t, bin, func(string) bool { return true })
			if name == "gc-sections" {
				compareWithAddr2line(t, openFileModule(t, New(Options{}), bin), bin, true, pcs)
			}
			want := resolveAll(t, nil, false, bin, pcs)
			dir := filepath.Join(t.TempDir(), "cache")
			used := func(stage string) (int64, bool) {
				c, err := diskcache.Open(dir, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				s := New(Options{Cache: c})
				defer s.Close()
				m := openFileModule(t, s, bin)
				for i, pc := range pcs {
					if got := m.Lookup(pc, nil); !reflect.DeepEqual(got, want[i]) {
						t.Fatalf("%s: %#x: got %+v, want %+v", stage, pc, got, want[i])
					}
				}
				x := m.src.dw
				return s.BudgetUsed(), x != nil && x.info != nil
			}
			cold, coldLoaded := used("cold")
			warm, warmLoaded := used("warm")
			if !coldLoaded || warmLoaded {
				t.Fatalf("DWARF sections loaded: cold %v, warm %v; want only cold", coldLoaded, warmLoaded)
			}
			if warm >= cold {
				t.Fatalf("warm run charged %d bytes, cold %d", warm, cold)
			}
		})
	}
}

// Lookups from many goroutines at once, cold then warm, through one cache:
// the same answers as without it (run under -race by make test).
func TestConcurrentCache(t *testing.T) {
	bin := cxxDebug(t, "gz-zlib")
	pcs := funcPCs(t, bin, func(string) bool { return true })
	want := resolveAll(t, nil, false, bin, pcs)
	dir := filepath.Join(t.TempDir(), "cache")
	for _, stage := range []string{"cold", "warm"} {
		c, err := diskcache.Open(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{Cache: c})
		m := openFileModule(t, s, bin)
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range pcs {
					i := (k + g*len(pcs)/8) % len(pcs)
					if got := m.Lookup(pcs[i], nil); !reflect.DeepEqual(got, want[i]) {
						errs <- fmt.Sprintf("%s: %#x: got %+v, want %+v", stage, pcs[i], got, want[i])
						return
					}
				}
			}()
		}
		wg.Wait()
		s.Close()
		c.Close()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}

// A binary without a symbol (stripped, exporting nothing) has an empty
// symbol table, and its cache entry is a hit like any other: it was once
// taken for a miss, and the table built and written again on every run.
func TestCacheEmptySymbolTable(t *testing.T) {
	skipWithout(t, "gcc")
	bin := artifact(t, "tiny-stripped", []string{"gcc", "-O1", "-nostdlib", "-static", "-s", "-Wl,--build-id", "-o", "$OUT", "$SRC/tiny.c"})
	dir := filepath.Join(t.TempDir(), "cache")
	run := func() map[string]uint64 {
		c, err := diskcache.Open(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{Cache: c})
		m := openFileModule(t, s, bin)
		if syms := m.Lookup(m.loads[0].vaddr, nil); len(syms) != 0 && syms[0].Function != "" {
			t.Fatalf("a stripped binary names %#x %q", m.loads[0].vaddr, syms[0].Function)
		}
		s.Close()
		c.Close()
		entries := map[string]uint64{} // name: inode (a rewritten entry is a new file)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			entries[e.Name()] = fi.Sys().(*syscall.Stat_t).Ino
		}
		return entries
	}
	cold := run()
	if len(cold) == 0 {
		t.Fatal("nothing was cached")
	}
	if warm := run(); !reflect.DeepEqual(warm, cold) {
		t.Errorf("the warm run wrote the cache again: %v, cold %v", warm, cold)
	}
}
