package symtab

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// askedOpener opens as SystemOpener does and records what it was asked.
type askedOpener struct {
	mu    sync.Mutex
	asked []string // "root|path"
}

func (o *askedOpener) Open(root, p string, follow bool) (*os.File, error) {
	o.mu.Lock()
	o.asked = append(o.asked, root+"|"+p)
	o.mu.Unlock()
	return SystemOpener{}.Open(root, p, follow)
}

func (o *askedOpener) OpenPerfMap(pid int, root string) (*os.File, error) {
	return SystemOpener{}.OpenPerfMap(pid, root)
}

// nameProgLocal loads ref's module with a Symbolizer of options o and
// checks that pc, in mapping mp, is prog_local.
func nameProgLocal(t *testing.T, o Options, ref ModuleRef, pc uint64, mp procMapping) {
	t.Helper()
	s := New(o)
	defer s.Close()
	m, err := s.Module(ref)
	if err != nil {
		t.Fatal(err)
	}
	vaddr, ok := m.FileOffsetToVaddr(pc - mp.start + mp.off)
	if name := lookupName(m, vaddr); !ok || name != "prog_local" {
		t.Errorf("shared root %v: %#x is %q, want prog_local", ref.SharedRoot, vaddr, name)
	}
}

// A module of a target that shares the host's root looks for its debug
// file on the host only; one that does not, on the host and then inside
// its root. (In the sandbox each lookup is a round trip to the parent.)
func TestSharedRootLooksOnce(t *testing.T) {
	pid, pc, mp, id := liveTarget(t, cprog(t, true))
	buildIDPath := "/usr/lib/debug/.build-id/" + id[:2] + "/" + id[2:] + ".debug"
	if _, err := os.Stat(buildIDPath); err == nil {
		t.Skipf("%s exists: the lookup would stop at the host", buildIDPath)
	}
	for _, shared := range []bool{true, false} {
		o := &askedOpener{}
		ref := refFor(pid, mp, id)
		ref.SharedRoot = shared
		nameProgLocal(t, Options{Opener: o}, ref, pc, mp)
		var host, inRoot int
		for _, a := range o.asked {
			switch {
			case a == "|"+buildIDPath:
				host++
			case a == ref.Root+"|"+buildIDPath:
				inRoot++
			}
		}
		wantInRoot := 1
		if shared {
			wantInRoot = 0
		}
		if host != 1 || inRoot != wantInRoot {
			t.Errorf("shared=%v: %s asked for %d times on the host and %d inside %s, want 1 and %d (asked: %s)",
				shared, buildIDPath, host, inRoot, ref.Root, wantInRoot, strings.Join(o.asked, ", "))
		}
	}
}

// firstOpener is askedOpener that opens candidates in one call each, as
// the sandboxed parser's opener does, recording how many each call had.
type firstOpener struct {
	askedOpener
	calls []int
}

func (o *firstOpener) OpenFirst(cands []Candidate) (int, *os.File, error) {
	o.mu.Lock()
	o.calls = append(o.calls, len(cands))
	o.mu.Unlock()
	var err error
	for i, c := range cands {
		var f *os.File
		if f, err = (SystemOpener{}).Open(c.Root, c.Path, true); err == nil {
			return i, f, nil
		}
	}
	return -1, nil, err
}

// A FirstOpener is asked for all of a module's debug file candidates in
// one call; one that opens but is not the module's (another build id) is
// passed over, and the candidates after it asked for in the next call.
func TestDebugFileCandidatesInOneCall(t *testing.T) {
	pid, pc, mp, id := liveTarget(t, cprog(t, true))
	if _, err := os.Stat("/usr/lib/debug/.build-id/" + id[:2] + "/" + id[2:] + ".debug"); err == nil {
		t.Skip("the target's debug file is installed: the lookup would stop there")
	}
	// A debug directory holding, under the target's build id, another
	// program's file.
	dir := t.TempDir()
	link := filepath.Join(dir, ".build-id", id[:2], id[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, cxxNoDebug(t), link)
	for _, shared := range []bool{true, false} {
		o := &firstOpener{}
		ref := refFor(pid, mp, id)
		ref.SharedRoot = shared
		nameProgLocal(t, Options{Opener: o, DebugDirs: []string{dir}}, ref, pc, mp)
		// Candidates: /usr/lib/debug's link then dir's, each on the host
		// and (not shared) inside the root; dir's is found on the host,
		// passed over, and the rest asked for.
		want := []int{2}
		if !shared {
			want = []int{4, 1}
		}
		single := 0 // debug files opened one by one
		for _, a := range o.asked {
			if strings.HasSuffix(a, ".debug") {
				single++
			}
		}
		if !reflect.DeepEqual(o.calls, want) || single != 0 {
			t.Errorf("shared=%v: calls of %v candidates, single opens %v; want calls of %v, no debug file",
				shared, o.calls, o.asked, want)
		}
	}
}
