package symtab

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// fetcher is a FetchDebug/FetchExecutable hook serving files by build id
// from a map, counting its calls.
type fetcher struct {
	files map[string]string
	calls atomic.Int32
	err   error // returned instead, when set
}

func (f *fetcher) fetch(ctx context.Context, id string) (string, error) {
	f.calls.Add(1)
	if f.err != nil {
		return "", f.err
	}
	if p, ok := f.files[id]; ok {
		return p, nil
	}
	return "", errors.New("not found")
}

// readerC is the address of reader_c in a split target (nm on its debug
// file) and what a lookup there gives.
func readerC(t *testing.T, sp testutil.Split, m *Module) []Sym {
	t.Helper()
	addr := nmFind(t, runNM(t, sp.Debug, false), "reader_c").addr
	return m.Lookup(addr+1, nil)
}

func wantReaderC(t *testing.T, syms []Sym) {
	t.Helper()
	if len(syms) == 0 || syms[len(syms)-1].Function != "reader_c" || filepath.Base(syms[len(syms)-1].File) != "blocked.c" || syms[len(syms)-1].Line <= 0 {
		t.Errorf("lookup gave %+v, want reader_c at blocked.c:N", syms)
	}
}

// A stripped binary's debug file comes from the hook, checked: another
// build's file is refused; a binary with DWARF of its own asks nothing.
func TestFetchDebugHook(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	other := testutil.SplitTarget(t, "hot", false)

	f := &fetcher{files: map[string]string{sp.BuildID: sp.Debug}}
	s := New(Options{FetchDebug: f.fetch})
	defer s.Close()
	m, err := s.Module(ModuleRef{Path: sp.Exe, BuildID: sp.BuildID})
	if err != nil {
		t.Fatal(err)
	}
	wantReaderC(t, readerC(t, sp, m))
	if m.DebugFile() != sp.Debug || f.calls.Load() != 1 {
		t.Errorf("debug file %q after %d calls", m.DebugFile(), f.calls.Load())
	}

	bad := &fetcher{files: map[string]string{sp.BuildID: other.Debug}}
	s2 := New(Options{FetchDebug: bad.fetch})
	defer s2.Close()
	m2, err := s2.Module(ModuleRef{Path: sp.Exe, BuildID: sp.BuildID})
	if err != nil {
		t.Fatal(err)
	}
	if syms := readerC(t, sp, m2); len(syms) != 0 || m2.DebugFile() != "" {
		t.Errorf("another build's debug file was used: %+v", syms)
	}

	full := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O0", "-g", "-pthread")
	none := &fetcher{}
	s3 := New(Options{FetchDebug: none.fetch})
	defer s3.Close()
	m3 := openFileModule(t, s3, full)
	m3.Lookup(nmFind(t, runNM(t, full, false), "reader_c").addr, nil)
	if none.calls.Load() != 0 {
		t.Errorf("a binary with DWARF asked for a debug file %d times", none.calls.Load())
	}
}

// A fetch deferred during a capture: the module serves the capture without
// its debug file, and the next Module call opens it again and asks again.
func TestFetchDeferred(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	f := &fetcher{files: map[string]string{sp.BuildID: sp.Debug}, err: ErrFetchDeferred}
	s := New(Options{FetchDebug: f.fetch})
	defer s.Close()
	ref := ModuleRef{Path: sp.Exe, BuildID: sp.BuildID}
	m, err := s.Module(ref)
	if err != nil {
		t.Fatal(err)
	}
	if syms := readerC(t, sp, m); len(syms) != 0 {
		t.Errorf("deferred: %+v", syms)
	}
	f.err = nil
	m2, err := s.Module(ref)
	if err != nil {
		t.Fatal(err)
	}
	if m2 == m {
		t.Fatal("the deferred module was returned again")
	}
	wantReaderC(t, readerC(t, sp, m2))
	if m3, _ := s.Module(ref); m3 != m2 || f.calls.Load() != 2 {
		t.Errorf("after the fetch: same module %v, %d calls (want 2)", m3 == m2, f.calls.Load())
	}
}

// report on another machine: the module file itself comes by build id.
func TestFetchExecutableHook(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	other := testutil.SplitTarget(t, "hot", false)
	exe := &fetcher{files: map[string]string{sp.BuildID: sp.Exe}}
	dbg := &fetcher{files: map[string]string{sp.BuildID: sp.Debug}}
	s := New(Options{FetchExecutable: exe.fetch, FetchDebug: dbg.fetch})
	defer s.Close()
	m, err := s.Module(ModuleRef{Path: "/gone/blocked", BuildID: sp.BuildID})
	if err != nil {
		t.Fatal(err)
	}
	if m.Mismatch() || m.BuildID() != sp.BuildID {
		t.Fatalf("mismatch %v, build id %s", m.Mismatch(), m.BuildID())
	}
	wantReaderC(t, readerC(t, sp, m))

	wrong := &fetcher{files: map[string]string{sp.BuildID: other.Exe}}
	s2 := New(Options{FetchExecutable: wrong.fetch})
	defer s2.Close()
	if _, err := s2.Module(ModuleRef{Path: "/gone/blocked", BuildID: sp.BuildID}); !errors.Is(err, ErrNotFound) {
		t.Errorf("another build's executable: %v, want not found", err)
	}
}

// PrefetchDebug asks for the debug files of several modules at once.
func TestPrefetchDebugParallel(t *testing.T) {
	a := testutil.SplitTarget(t, "blocked", false)
	b := testutil.SplitTarget(t, "hot", false)
	var mu sync.Mutex
	arrived := map[string]bool{}
	both := make(chan struct{})
	var alone atomic.Bool
	hook := func(ctx context.Context, id string) (string, error) {
		mu.Lock()
		if !arrived[id] {
			arrived[id] = true
			if len(arrived) == 2 {
				close(both)
			}
		}
		mu.Unlock()
		select {
		case <-both: // each waits for the other: only a parallel prefetch gets past
		case <-time.After(10 * time.Second):
			alone.Store(true)
			return "", errors.New("the other module was not asked meanwhile")
		}
		return map[string]string{a.BuildID: a.Debug, b.BuildID: b.Debug}[id], nil
	}
	s := New(Options{FetchDebug: hook})
	defer s.Close()
	s.PrefetchDebug([]ModuleRef{{Path: a.Exe, BuildID: a.BuildID}, {Path: b.Exe, BuildID: b.BuildID}})
	if len(arrived) != 2 || alone.Load() {
		t.Fatalf("asked for %v; one at a time: %v", arrived, alone.Load())
	}
	m, _ := s.Module(ModuleRef{Path: a.Exe, BuildID: a.BuildID})
	wantReaderC(t, readerC(t, a, m))
}

// FileBuildID reads what a debuginfod server sent: hostile bytes, here a
// seed binary patched as FuzzELF patches them.
func FuzzFileBuildID(f *testing.F) {
	seeds := fuzzSeedImages(f)
	var data []byte
	f.Fuzz(func(t *testing.T, which uint8, off uint32, patch []byte) {
		if len(patch) > 256 || len(seeds) == 0 {
			return
		}
		data = testutil.Patched(data, seeds[int(which)%len(seeds)], off, patch)
		id, err := FileBuildID(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if len(id) == 0 || len(id)%2 != 0 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("build id %q", id)
		}
	})
}
