//go:build linux

package symtab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"stackshot/internal/testutil"
)

// TestContainerPerfMapSymlink: a target in its own mount namespace (a
// tmpfs on /tmp) makes its /tmp/perf-PID.map an absolute symlink to a host
// file. Through /proc/PID/root the symlink must resolve inside the
// target's tree (where the host file does not exist), never against
// stackshot's root: the host file's lines must not become frame names.
func TestContainerPerfMapSymlink(t *testing.T) {
	skipWithout(t, "unshare", "mount", "sh")
	if o, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs tmpfs /tmp").CombinedOutput(); err != nil {
		t.Skipf("this machine does not allow mount namespaces (unshare -m: %v: %s)", err, o)
	}
	host := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(host, []byte("1000 100 HOST_SECRET_LINE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The map file is the host file itself seen through the symlink: if
	// it were followed out of the container, 0x1000 would be named.
	pid, _ := startTarget(t, "unshare", "-m", "--propagation", "private", "sh", "-c",
		fmt.Sprintf("mount -t tmpfs tmpfs /tmp && ln -s %s /tmp/perf-$$.map && echo ready && exec sleep 600", host))
	root := fmt.Sprintf("/proc/%d/root", pid)
	if l, err := os.Readlink(fmt.Sprintf("%s/tmp/perf-%d.map", root, pid)); err != nil || l != host {
		t.Fatalf("the target's perf map is not the planted symlink (%q, %v): the test would prove nothing", l, err)
	}
	if _, err := os.Stat(fmt.Sprintf("%s/tmp/perf-%d.map", root, pid)); err != nil {
		t.Fatalf("following the symlink naively does not reach the host file (%v): the test would prove nothing", err)
	}
	s := New(Options{})
	defer s.Close()
	if pm := s.PerfMapFor(pid, root); pm != nil {
		name, _, ok := pm.Lookup(0x1010)
		t.Errorf("perf map read through a symlink out of the container: %d entries, 0x1010 -> %q %v", pm.Len(), name, ok)
	}
}

// fifoRace has swap turn a path, atomically and in a loop, into a regular
// file and into a FIFO (dir/fifo.stable, made here), while try opens the
// path 10000 times. A writer blocked on the FIFO (through its second link)
// counts every open of it for reading: there must be none, while some
// opens of the regular file succeed and some are refused.
func fifoRace(t *testing.T, dir string, swap func(toFIFO bool, fifo string), try func() error) {
	fifo := filepath.Join(dir, "fifo.stable")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	var landed atomic.Int64
	var stopping atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the FIFO's writer: each open that returns met a reader
		defer wg.Done()
		for {
			fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if stopping.Load() {
				if err == nil {
					unix.Close(fd)
				}
				return
			}
			if err == nil {
				landed.Add(1)
				unix.Close(fd)
			}
		}
	}()
	done := make(chan struct{})
	var swaps atomic.Int64
	wg.Add(1)
	go func() { // the attacker
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			swap(false, fifo)
			swap(true, fifo)
			swaps.Add(1)
		}
	}()
	var ok, refused int
	for i := 0; i < 10000; i++ {
		if err := try(); err == nil {
			ok++
		} else {
			refused++
		}
	}
	close(done)
	stopping.Store(true)
	// Release the writer: one open of ours, not counted.
	if fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
		defer unix.Close(fd)
	}
	wg.Wait()
	t.Logf("%d swaps; %d opens of the file, %d refusals; %d opens landed on the FIFO", swaps.Load(), ok, refused, landed.Load())
	if ok == 0 || refused == 0 {
		t.Fatalf("the race was not exercised (%d opens, %d refusals)", ok, refused)
	}
	if n := landed.Load(); n != 0 {
		t.Errorf("%d opens landed on the FIFO", n)
	}
}

// TestModulePathFIFORace: a module's path is renamed over, in turn, by a
// regular ELF file and by a FIFO.
func TestModulePathFIFORace(t *testing.T) {
	dir := t.TempDir()
	master := filepath.Join(dir, "elf.master")
	if err := os.WriteFile(master, testutil.BombELF(nil, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "lib")
	tmp := filepath.Join(dir, "tmp")
	fifoRace(t, dir, func(toFIFO bool, fifo string) {
		src := master
		if toFIFO {
			src = fifo
		}
		os.Link(src, tmp)
		os.Rename(tmp, lib)
	}, func() error {
		s := New(Options{})
		defer s.Close()
		_, err := s.Module(ModuleRef{Path: lib})
		return err
	})
}

// TestPerfMapSymlinkFIFORace: the perf map the operator names is a
// symlink (followed: it is the operator's path) swapped between a regular
// map and a FIFO.
func TestPerfMapSymlinkFIFORace(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.map")
	if err := os.WriteFile(real, []byte("1000 100 jit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "perf.map")
	tmp := filepath.Join(dir, "tmp")
	fifoRace(t, dir, func(toFIFO bool, fifo string) {
		dst := real
		if toFIFO {
			dst = fifo
		}
		os.Symlink(dst, tmp)
		os.Rename(tmp, link)
	}, func() error {
		s := New(Options{PerfMap: link})
		if s.PerfMapFor(1, "") == nil {
			return fmt.Errorf("no map")
		}
		return nil
	})
}

// TestPerfMapOwner: a perf map is used only when it belongs to the
// target's user or to root. The target here runs as root; the same map
// owned by another user is ignored.
func TestPerfMapOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root to give the perf map to another user")
	}
	skipWithout(t, "gcc")
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("symtab", "mapfile.c")}, "-O2")
	tg := testutil.Start(t, bin, "/proc/self/exe")
	pid := tg.PID
	p := fmt.Sprintf("/tmp/perf-%d.map", pid)
	if err := os.WriteFile(p, []byte("1000 100 planted_or_not\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	root := fmt.Sprintf("/proc/%d/root", pid)
	name := func() string {
		s := New(Options{})
		defer s.Close()
		n, _, _ := s.PerfMapFor(pid, root).Lookup(0x1010)
		return n
	}
	if got := name(); got != "planted_or_not" {
		t.Fatalf("root-owned map of a root target: %q, want planted_or_not", got)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != "" {
		t.Errorf("map owned by uid 65534 for a root target was used: %q", got)
	}
}

// TestPerfMapOffline: without a live root (a saved capture) the analysing
// host's /tmp/perf-PID.map is never read; only the map the operator names.
func TestPerfMapOffline(t *testing.T) {
	const pid = 1 << 22 // above pid_max: no process, yet a file may exist
	p := fmt.Sprintf("/tmp/perf-%d.map", pid)
	if err := os.WriteFile(p, []byte("1000 100 host_file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	s := New(Options{})
	if pm := s.PerfMapFor(pid, ""); pm != nil {
		t.Errorf("offline lookup read the host's %s (%d entries)", p, pm.Len())
	}
	given := filepath.Join(t.TempDir(), "given.map")
	if err := os.WriteFile(given, []byte("1000 100 from_given_map\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = New(Options{PerfMap: given})
	if n, _, _ := s.PerfMapFor(pid, "").Lookup(0x1010); n != "from_given_map" {
		t.Errorf("with Options.PerfMap: %q, want from_given_map", n)
	}
}

// TestPerfMapCarried: a perf map a saved capture carries is used for its
// pid offline, before the one the operator names.
func TestPerfMapCarried(t *testing.T) {
	pm, err := ParsePerfMap(strings.NewReader("1000 100 carried_jit\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	s.AddPerfMap(42, pm)
	if n, _, _ := s.PerfMapFor(42, "").Lookup(0x1010); n != "carried_jit" {
		t.Errorf("carried map: %q, want carried_jit", n)
	}
	if s.PerfMapFor(43, "") != nil {
		t.Error("another pid got the carried map")
	}
}
