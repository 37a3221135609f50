package symtab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// liveModule starts bin (which prints the runtime address of prog_local
// first) and returns the pid, that address and its mapping.
func liveTarget(t *testing.T, argv ...string) (int, uint64, procMapping, string) {
	t.Helper()
	pid, line := startTarget(t, argv...)
	var pc uint64
	if _, err := fmt.Sscanf(line, "0x%x", &pc); err != nil {
		t.Fatalf("target printed %q: %v", line, err)
	}
	maps := readProcMaps(t, pid)
	mp := mappingOf(t, maps, pc)
	var base uint64
	for _, x := range maps {
		if x.path == mp.path && x.off == 0 {
			base = x.start
			break
		}
	}
	id, err := BuildIDFromMemory(procMem(t, pid), base)
	if err != nil {
		t.Fatalf("build id from memory: %v", err)
	}
	return pid, pc, mp, id
}

// TestReplacedBinary: the binary is replaced on disk while it runs. Through
// map_files the original inode still resolves; without map_files the new
// file at the path must be reported as a mismatch, never named.
func TestReplacedBinary(t *testing.T) {
	orig := cprog(t, false)
	other := cxxNoDebug(t)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	copyFile(t, orig, victim)
	pid, pc, mp, id := liveTarget(t, victim)
	// Replace: a different program renamed over the path.
	copyFile(t, other, victim+".new")
	if err := os.Rename(victim+".new", victim); err != nil {
		t.Fatal(err)
	}
	if p := mappingOf(t, readProcMaps(t, pid), pc).path; p != victim+" (deleted)" {
		t.Fatalf("after the replace the mapping shows %q, want %q", p, victim+" (deleted)")
	}
	want := nmFind(t, runNM(t, orig, false), "prog_local").addr
	otherNames := map[string]bool{}
	for _, s := range runNM(t, other, true) {
		otherNames[s.name] = true
	}
	off := pc - mp.start + mp.off
	ref := refFor(pid, mp, id)
	ref.Path = victim

	cases := []struct {
		name     string
		ref      ModuleRef
		mismatch bool
	}{
		{"map_files", ref, false},
		{"path with build id", ModuleRef{Path: victim, Root: ref.Root, Dev: ref.Dev, Inode: ref.Inode, BuildID: id}, true},
		{"path with inode only", ModuleRef{Path: victim, Root: ref.Root, Dev: ref.Dev, Inode: ref.Inode}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(Options{})
			defer s.Close()
			m, err := s.Module(c.ref)
			if err != nil {
				t.Fatal(err)
			}
			if m.Mismatch() != c.mismatch {
				t.Fatalf("Mismatch() = %v, want %v", m.Mismatch(), c.mismatch)
			}
			vaddr, ok := m.FileOffsetToVaddr(off)
			if c.mismatch {
				if ok {
					t.Errorf("mismatched module translated an offset")
				}
				// Even the raw offset must not name anything.
				for _, a := range []uint64{off, want} {
					if got := m.Lookup(a, nil); len(got) != 0 {
						t.Errorf("mismatched module named %#x: %+v", a, got)
					}
				}
				return
			}
			if !ok || vaddr != want {
				t.Fatalf("FileOffsetToVaddr = %#x, %v; want %#x", vaddr, ok, want)
			}
			got := lookupName(m, vaddr)
			if got != "prog_local" || otherNames[got] {
				t.Errorf("Lookup = %q, want prog_local (never a name of the new file)", got)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestMountNamespace: the target runs a binary that exists only in its own
// mount namespace (a tmpfs mounted after `unshare -m`); it resolves
// through Root=/proc/PID/root, and not at all without it.
func TestMountNamespace(t *testing.T) {
	skipWithout(t, "unshare", "mount", "sh")
	orig := cprog(t, true)
	dir := t.TempDir()
	inner := filepath.Join(dir, "inner")
	probe := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs tmpfs "+dir)
	if o, err := probe.CombinedOutput(); err != nil {
		t.Skipf("this machine does not allow mount namespaces (unshare -m: %v: %s)", err, o)
	}
	pid, pc, mp, id := liveTarget(t, "unshare", "-m", "--propagation", "private", "sh", "-c",
		fmt.Sprintf("mount -t tmpfs tmpfs %s && cp %s %s && exec %s", dir, orig, inner, inner))
	if mp.path != inner {
		t.Fatalf("pc %#x is in %q, want %q", pc, mp.path, inner)
	}
	if _, err := os.Stat(inner); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is visible on the host (%v): the test would prove nothing", inner, err)
	}
	want := nmFind(t, runNM(t, orig, false), "prog_local").addr
	ref := refFor(pid, mp, id)
	ref.MapFiles = "" // as from a saved capture: only Root can find it
	s := New(Options{})
	defer s.Close()
	m, err := s.Module(ref)
	if err != nil {
		t.Fatal(err)
	}
	vaddr, ok := m.FileOffsetToVaddr(pc - mp.start + mp.off)
	if m.Mismatch() || !ok || vaddr != want || lookupName(m, vaddr) != "prog_local" {
		t.Errorf("through root: mismatch=%v vaddr=%#x ok=%v name=%q; want prog_local at %#x", m.Mismatch(), vaddr, ok, lookupName(m, vaddr), want)
	}
	ref.Root = ""
	if _, err := New(Options{}).Module(ref); !errors.Is(err, ErrNotFound) {
		t.Errorf("without root: err = %v, want ErrNotFound", err)
	}
}

// TestLiveCxxInline looks at the running C++ target through map_files and
// expects the spinning thread's function and the inline frames of the
// whole program to agree with addr2line on the file.
func TestLiveCxxInline(t *testing.T) {
	bin := cxxDebug(t, "dwarf5")
	pid, _ := startTarget(t, bin, "spin")
	maps := readProcMaps(t, pid)
	var mp procMapping // any mapping of the file: map_files opens its inode
	for _, x := range maps {
		if x.path == bin && x.off == 0 {
			mp = x
			break
		}
	}
	id, err := BuildIDFromMemory(procMem(t, pid), mp.start)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	defer s.Close()
	m, err := s.Module(refFor(pid, mp, id))
	if err != nil || m.Mismatch() {
		t.Fatalf("Module: %v, mismatch %v", err, m != nil && m.Mismatch())
	}
	compareWithAddr2line(t, m, bin, true, funcPCs(t, bin, func(n string) bool { return strings.Contains(n, "outer::") || n == "main" }))
}

// TestVDSO parses the vdso of this test process from memory and expects
// the names nm -D gives for a copy of the same image.
func TestVDSO(t *testing.T) {
	skipWithout(t, "nm")
	pid := os.Getpid()
	var vdso procMapping
	for _, x := range readProcMaps(t, pid) {
		if x.path == "[vdso]" {
			vdso = x
		}
	}
	if vdso.end == 0 {
		t.Skip("this kernel maps no vdso into processes")
	}
	img := make([]byte, vdso.end-vdso.start)
	if _, err := procMem(t, pid).ReadAt(img, int64(vdso.start)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "vdso.so")
	if err := os.WriteFile(file, img, 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	defer s.Close()
	m, err := s.ModuleFromImage(img, "[vdso]")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := BuildIDFromMemory(procMem(t, pid), vdso.start); err != nil || id != m.BuildID() {
		t.Errorf("build id from memory %q (%v), from image %q", id, err, m.BuildID())
	}
	n := 0
	nm := runNM(t, file, false, "-D")
	for _, sym := range nm {
		if !isFuncType(sym.typ) || sym.size == 0 {
			continue
		}
		n++
		// Aliases (clock_gettime, __vdso_clock_gettime) share an address;
		// nm adds the symbol version after "@".
		names := map[string]bool{}
		for a := range aliases(nm, sym.addr) {
			base, _, _ := strings.Cut(a, "@")
			names[base] = true
		}
		if got := lookupName(m, sym.addr+sym.size-1); !names[got] {
			t.Errorf("vdso %#x: got %q, want one of %v", sym.addr+sym.size-1, got, keys(names))
		}
	}
	if n == 0 {
		t.Fatal("nm -D lists no vdso functions")
	}
}

// TestNonRegularFiles: a FIFO, a directory and a device at a module's
// path are refused without blocking (an open of a FIFO for reading would
// wait for a writer forever).
func TestNonRegularFiles(t *testing.T) {
	skipWithout(t, "mkfifo")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if o, err := exec.Command("mkfifo", fifo).CombinedOutput(); err != nil {
		t.Fatalf("mkfifo: %v %s", err, o)
	}
	for _, p := range []string{fifo, dir, "/dev/zero"} {
		done := make(chan error, 1)
		go func() {
			_, err := New(Options{}).Module(ModuleRef{Path: p})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: opened as a module", p)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Module blocked", p)
		}
		if _, err := LoadPerfMap(p); err == nil {
			t.Errorf("%s: loaded as a perf map", p)
		}
	}
}
