//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"stackshot/internal/diskcache"
	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// A dump's resolve comes with what naming the frames of its threads'
// modules asks for first (giveDebug): with the cache filled, the child
// makes no call at all for libc's debug file (by build id, libc6-dbg), the
// executable's (none: said so), their symbol tables and, for file:line,
// their DWARF's unit indexes and units; the first dump, whose cache is
// empty, asks for the entries. The frames are the in-process symbolizer's
// either way.
func TestDebugGivenWithResolve(t *testing.T) {
	tg := startAsOther(t)
	t.Run("names", func(t *testing.T) { debugGivenWithResolve(t, tg, true) })
	t.Run("lines", func(t *testing.T) { debugGivenWithResolve(t, tg, false) })
}

func debugGivenWithResolve(t *testing.T, tg *testutil.Target, namesOnly bool) {
	mem := ptrace.MemReader{PID: tg.PID}
	cache, err := diskcache.Open(filepath.Join(t.TempDir(), "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	var libcDebug string
	dump := func(stage string) (*Child, *ptrace.Process) {
		t.Helper()
		tgt, err := TargetOf(tg.PID)
		if err != nil {
			t.Fatal(err)
		}
		cfg := liveConfig()
		cfg.Cache, cfg.Symtab.NamesOnly = cache, namesOnly
		c := startChild(t, cfg, tgt)
		p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto, CheckAll: c.CheckAll()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// (given once the capture read the build ids: the child readies
		// the modules while the parent finishes the capture)
		if !c.gaveDebug {
			t.Errorf("%s: the debug files were not given with the capture", stage)
		}
		rp, err := c.Resolve(p)
		if err != nil {
			t.Fatal(err)
		}
		c.Close() // (a cold dump's entries are written now)
		want := resolve.NewResolver(symtab.New(symtab.Options{NamesOnly: namesOnly}), resolve.Options{Live: true}).Process(p, mem)
		gc, wc := lineChains(rp), lineChains(want)
		if len(wc) < 7 || len(gc) != len(wc) {
			t.Fatalf("%s: threads: sandbox %d, in-process %d", stage, len(gc), len(wc))
		}
		for name, w := range wc {
			if gc[name] != w {
				t.Errorf("%s: thread %s:\n sandbox    %s\n in-process %s", stage, name, gc[name], w)
			}
		}
		for _, m := range p.Maps {
			if m.Kind == procmaps.KindFile && filepath.Base(m.Path) == "libc.so.6" {
				libcDebug, _ = symtab.BuildIDDebugPath(p.BuildIDs[procmaps.Maps(p.Maps).FirstOfFile(&m).Start])
			}
		}
		return c, p
	}

	cold, _ := dump("cold")
	if cold.calls[kCacheGet] == 0 {
		t.Errorf("cold: the child asked for no cache entry (%d given)", cold.entriesGiven)
	}
	if libcDebug == "" {
		t.Fatal("no libc mapped, or no build id for it")
	}
	if _, err := os.Stat(libcDebug); err != nil {
		t.Skipf("libc's debug file is not installed (%v): libc6-dbg", err)
	}
	warm, _ := dump("warm")
	if n := warm.calls[kOpen] + warm.calls[kCacheGet]; n != 0 {
		t.Errorf("warm: the child asked for %d files and %d cache entries, want none", warm.calls[kOpen], warm.calls[kCacheGet])
	}
	// Two module files with the checks; with the resolve, libc's debug
	// file, the executable's absence, both symbol tables, and for lines
	// the unit index and units of libc's debug file and the executable.
	entries := 2
	if !namesOnly {
		entries = 6
	}
	if warm.asked[kGive] != 4 || warm.asked[kGiveCache] != entries || warm.entriesGiven != entries {
		t.Errorf("warm: %d files and %d entries given (%d counted), want 4 and %d", warm.asked[kGive], warm.asked[kGiveCache], warm.entriesGiven, entries)
	}
}

// lineChains is chains with each frame's file, line and whether it is
// inlined.
func lineChains(p *report.Process) map[string]string {
	return chainsOf(p, func(f report.Frame) string {
		return fmt.Sprintf("%s@%x %s:%d %v", f.Function, f.PC, f.File, f.Line, f.Inlined)
	})
}
