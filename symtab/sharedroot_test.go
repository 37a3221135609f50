package symtab

import (
	"os"
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
		s := New(Options{Opener: o})
		ref := refFor(pid, mp, id)
		ref.SharedRoot = shared
		m, err := s.Module(ref)
		if err != nil {
			t.Fatal(err)
		}
		vaddr, ok := m.FileOffsetToVaddr(pc - mp.start + mp.off)
		if name := lookupName(m, vaddr); !ok || name != "prog_local" {
			t.Errorf("shared=%v: %#x is %q, want prog_local", shared, vaddr, name)
		}
		s.Close()
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
