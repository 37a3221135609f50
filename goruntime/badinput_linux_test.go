//go:build linux

package goruntime_test

import (
	"debug/elf"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"stackshot/goruntime"
	"stackshot/internal/testutil"
	"stackshot/ptrace"
)

func goTarget(t *testing.T, flags []string, args ...string) (*testutil.Target, string) {
	t.Helper()
	have, _ := testutil.GoToolchains()
	bin := testutil.BuildGo(t, have[0], testutil.Testdata("goruntime", "goroutines"), []string{"CGO_ENABLED=0"}, flags...)
	return testutil.Start(t, bin, args...), bin
}

// killingReader reads the target's memory and kills the target after a
// number of reads: the process exits in the middle of the goroutine read.
type killingReader struct {
	mem   ptrace.MemReader
	after int64
	n     atomic.Int64
}

func (k *killingReader) ReadAt(p []byte, off int64) (int, error) {
	if k.n.Add(1) == k.after {
		syscall.Kill(k.mem.PID, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(k.mem.PID, &ws, 0, nil)
	}
	return k.mem.ReadAt(p, off)
}

// TestGoroutinesProcessExits: a process that exits while its goroutines
// are read gives an error, never a crash, a hang or a half-read list.
func TestGoroutinesProcessExits(t *testing.T) {
	for _, after := range []int64{1, 2, 3, 50, 400} {
		tg, bin := goTarget(t, nil, "-park", "300")
		f, err := os.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		kr := &killingReader{mem: ptrace.MemReader{PID: tg.PID}, after: 1 << 40}
		rt, err := goruntime.Open(goruntime.Target{Mem: kr, Exe: f})
		if err != nil {
			t.Fatal(err)
		}
		kr.n.Store(0)
		kr.after = after
		snap, err := rt.Goroutines()
		tg.Cmd.Process.Release()
		if err == nil {
			// (300 goroutines take more reads than any of these.)
			t.Errorf("killed after %d reads: no error, %d goroutines, %d skipped", after, len(snap.Goroutines), snap.Skipped)
		} else {
			t.Logf("killed after %d reads: %v", after, err)
		}
	}
}

// TestGoroutinesChurn: goroutines created and ended in a tight loop while
// the list is read: every goroutine returned is whole (a real chain down
// to runtime.goexit, unique goids); torn ones are counted, not shown.
func TestGoroutinesChurn(t *testing.T) {
	tg, bin := goTarget(t, nil)
	if a := tg.Ask("churn"); a != "ok" {
		t.Fatal(a)
	}
	rt := openTarget(t, tg.PID, bin)
	skipped := 0
	for i := 0; i < 200; i++ {
		snap, err := rt.Goroutines()
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		skipped += snap.Skipped
		seen := map[uint64]bool{}
		for _, g := range snap.Goroutines {
			if seen[g.ID] {
				t.Fatalf("read %d: goroutine %d twice", i, g.ID)
			}
			seen[g.ID] = true
			if g.Status == "running" && len(g.PCs) == 0 {
				continue // (its stack is its thread's)
			}
			// A running goroutine with PCs was on the system stack: its
			// own frames, from where it left them, are whole too.
			if len(g.Funcs) == 0 || g.Funcs[len(g.Funcs)-1] != "runtime.goexit" || len(g.Funcs) != len(g.PCs) {
				t.Errorf("read %d: goroutine %d [%s] not whole: %v", i, g.ID, g.Status, g.Funcs)
			}
			for _, f := range g.Funcs {
				if f == "" {
					t.Errorf("read %d: goroutine %d has an unnamed frame", i, g.ID)
				}
			}
		}
	}
	t.Logf("200 reads under churn: %d goroutines skipped as torn in all", skipped)
}

// TestUnknownRelease: a release the table does not know is refused for a
// stripped binary, never guessed; a binary with DWARF and symbols still
// works (offsets from DWARF, words from its own string tables).
func TestUnknownRelease(t *testing.T) {
	for _, v := range []struct {
		name   string
		flags  []string
		reject bool
	}{{"stripped", []string{"-ldflags=-s -w"}, true}, {"plain", nil, false}} {
		t.Run(v.name, func(t *testing.T) {
			tg, bin := goTarget(t, v.flags)
			f, err := os.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			rt, err := goruntime.Open(goruntime.Target{Mem: ptrace.MemReader{PID: tg.PID}, Exe: f, Version: "go1.99.1"})
			var unknown *goruntime.UnknownVersionError
			if v.reject {
				if !errors.As(err, &unknown) || unknown.Version != "go1.99.1" {
					t.Fatalf("err %v, want an UnknownVersionError naming go1.99.1", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rt.LayoutFrom != "dwarf" {
				t.Errorf("layout from %s", rt.LayoutFrom)
			}
			snap, err := rt.Goroutines()
			if err != nil {
				t.Fatal(err)
			}
			reasons := map[string]bool{}
			for _, g := range snap.Goroutines {
				reasons[g.WaitReason] = true
			}
			if !reasons["chan receive"] || !reasons["select"] {
				t.Errorf("wait reasons %v", reasons)
			}
		})
	}
}

// TestNotGo: a C binary is not a Go program.
func TestNotGo(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin, "1")
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := goruntime.Open(goruntime.Target{Mem: ptrace.MemReader{PID: tg.PID}, Exe: f}); !errors.Is(err, goruntime.ErrNotGo) {
		t.Errorf("err %v, want ErrNotGo", err)
	}
}

// TestGivenAllgs: addresses of allgs and allglen given by the caller (as
// symtab finds them in stripped binaries) are used: here those of the
// unstripped build, moved to where the stripped build's sections lie.
func TestGivenAllgs(t *testing.T) {
	_, plain := goTarget(t, nil)
	tg, stripped := goTarget(t, []string{"-ldflags=-s -w"})
	ef, err := elf.Open(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var allgs, allglen uint64
	for _, s := range syms {
		switch s.Name {
		case "runtime.allgs":
			allgs = s.Value
		case "runtime.allglen":
			allglen = s.Value
		}
	}
	sf, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	for _, sec := range []struct {
		name string
		addr *uint64
	}{{".bss", &allgs}, {".noptrbss", &allglen}} {
		a, b := ef.Section(sec.name), sf.Section(sec.name)
		if a == nil || b == nil || *sec.addr < a.Addr || *sec.addr >= a.Addr+a.Size {
			t.Fatalf("%s: no section for %#x", sec.name, *sec.addr)
		}
		*sec.addr = *sec.addr - a.Addr + b.Addr
	}
	f, err := os.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rt, err := goruntime.Open(goruntime.Target{Mem: ptrace.MemReader{PID: tg.PID}, Exe: f, AllGs: allgs, AllGLen: allglen})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := rt.Goroutines()
	if err != nil || len(snap.Goroutines) < 7 {
		t.Fatalf("%v, %v", snap, err)
	}
	// A wrong address is no list: an error or nothing, never garbage.
	rt, err = goruntime.Open(goruntime.Target{Mem: ptrace.MemReader{PID: tg.PID}, Exe: f, AllGs: allgs + 8, AllGLen: allglen})
	if err == nil {
		if snap, err := rt.Goroutines(); err == nil && len(snap.Goroutines) > 0 {
			t.Errorf("goroutines read through a wrong allgs: %d", len(snap.Goroutines))
		}
	}
}

// TestGoroutinesDeep: a goroutine deeper than a walk goes is listed with
// its innermost frames and says it was cut short, never left out as if
// it had changed while read; one within the bound is whole.
func TestGoroutinesDeep(t *testing.T) {
	tg, bin := goTarget(t, nil)
	for _, n := range []string{"3000", "200"} {
		if a := tg.Ask("deep " + n); a != "ok" {
			t.Fatal(a)
		}
	}
	rt := openTarget(t, tg.PID, bin)
	snap, err := rt.Goroutines()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Skipped != 0 {
		t.Errorf("%d goroutines skipped: %v", snap.Skipped, snap.SkipReasons)
	}
	depth := func(g *goruntime.Goroutine) (n int) {
		for _, f := range g.Funcs {
			if f == "main.deep" {
				n++
			}
		}
		return n
	}
	var cut, whole int
	for i := range snap.Goroutines {
		g := &snap.Goroutines[i]
		switch d := depth(g); {
		case d == 0:
		case d > 1000:
			cut++
			if len(g.PCs) != 1024 || g.Cut != "stack cut short: more than 1024 frames" {
				t.Errorf("deep goroutine %d: %d frames, cut %q", g.ID, len(g.PCs), g.Cut)
			}
			if g.Funcs[len(g.Funcs)-1] != "main.deep" {
				t.Errorf("deep goroutine %d ends in %s", g.ID, g.Funcs[len(g.Funcs)-1])
			}
		default:
			whole++
			if d != 201 || g.Cut != "" || g.Funcs[len(g.Funcs)-1] != "runtime.goexit" {
				t.Errorf("goroutine %d: %d calls of main.deep (want 201), cut %q, ends in %s", g.ID, d, g.Cut, g.Funcs[len(g.Funcs)-1])
			}
		}
	}
	if cut != 1 || whole != 1 {
		t.Errorf("%d cut and %d whole goroutines in main.deep, want 1 each", cut, whole)
	}
}
