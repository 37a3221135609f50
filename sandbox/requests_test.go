//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"stackshot/capfile"
	"stackshot/diagnose"
	"stackshot/goruntime"
	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// startOther starts bin as otherUser.
func startOther(t *testing.T, bin string, args ...string) *testutil.Target {
	t.Helper()
	needRoot(t)
	setpriv := testutil.Need(t, "setpriv")
	tg := testutil.Start(t, setpriv, append([]string{"--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--", bin}, args...)...)
	if st, err := procmaps.ReadStatus(tg.PID); err != nil || st.UIDs[1] != otherUser {
		t.Fatalf("target runs as %+v (%v), want uid %d", st.UIDs, err, otherUser)
	}
	return tg
}

// goBin builds the goroutines target; readable by otherUser.
func goBin(t *testing.T, env []string, flags ...string) string {
	have, _ := testutil.GoToolchains()
	if len(have) == 0 {
		testutil.Skip(t, "no Go toolchain")
	}
	return testutil.BuildGo(t, have[0], testutil.Testdata("goruntime", "goroutines"), env, flags...)
}

// inProcess resolves p here, as stackshot does without a child.
func inProcess(p *ptrace.Process) (*resolve.Resolver, *report.Process) {
	res := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true})
	return res, res.Process(p, ptrace.MemReader{PID: p.MemPID()})
}

// goroutineChains keys each parked goroutine by id: status, wait
// reason, creator and function chain (with lines).
func goroutineChains(p *report.Process) map[uint64]string {
	out := map[uint64]string{}
	for _, g := range p.Goroutines {
		if g.Status != "waiting" {
			out[g.GoID] = "not waiting" // (may move between the two reads)
			continue
		}
		var fs []string
		for _, f := range g.Frames {
			fs = append(fs, fmt.Sprintf("%s:%d@%x/%s", f.Function, f.Line, f.PC, f.Method))
		}
		cb := ""
		if g.CreatedBy != nil {
			cb = fmt.Sprintf("%s:%d", g.CreatedBy.Function, g.CreatedBy.Line)
		}
		out[g.GoID] = fmt.Sprintf("%s/%s by %s: %s", g.Status, g.WaitReason, cb, strings.Join(fs, " <- "))
	}
	return out
}

// The goroutines of another user's Go program, read in the child (its
// executable and memory file handed over), are those goruntime.Live reads
// in-process, for a binary with symbols and a stripped one: the same ids,
// statuses, wait reasons, creators and frames. The child read the
// target's memory itself (pread on the descriptor): no read was asked of
// the parent.
func TestGoroutinesInChild(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
	}{{"symbols", nil}, {"stripped", []string{"-ldflags=-s -w"}}} {
		t.Run(v.name, func(t *testing.T) {
			tg := startOther(t, goBin(t, []string{"CGO_ENABLED=0"}, v.flags...), "-park", "40")
			tgt, err := TargetOf(tg.PID)
			if err != nil {
				t.Fatal(err)
			}
			c := startChild(t, liveConfig(), tgt)
			p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
			if err != nil {
				t.Fatal(err)
			}
			boxed, err := c.Resolve(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Goroutines(p, boxed); err != nil {
				t.Fatal(err)
			}
			res, here := inProcess(p)
			space := res.Space(p, ptrace.MemReader{PID: p.MemPID()})
			goruntime.Live(p, here, goruntime.SymbolizerFunc(func(pc uint64, exact bool) []report.Frame {
				return res.Symbolize(space, pc, exact)
			}), time.Time{}, nil)
			if boxed.Runtime == nil || here.Runtime == nil || *boxed.Runtime != *here.Runtime {
				t.Fatalf("runtime: child %+v, here %+v (warnings %q)", boxed.Runtime, here.Runtime, boxed.Warnings)
			}
			b, h := goroutineChains(boxed), goroutineChains(here)
			parked := 0
			for id, want := range h {
				if b[id] != want && (b[id] == "" || want != "not waiting" && b[id] != "not waiting") {
					t.Errorf("goroutine %d:\n child %s\n here  %s", id, b[id], want)
				}
				if strings.Contains(want, "chan receive") && strings.Contains(want, "main.") {
					parked++
				}
			}
			if len(b) != len(h) || parked < 40 {
				t.Errorf("parked goroutines: child %d, here %d (%d in main's chan receive, want >= 40)", len(b), len(h), parked)
			}
			if n := c.calls[kMem]; n != 0 {
				t.Errorf("the child asked the parent for %d memory reads, want none (it holds the memory file)", n)
			}
		})
	}
}

// lockView is what the diagnosis says of each thread, by name.
func lockView(p *report.Process) (map[string]string, string) {
	out := map[string]string{}
	byTID := map[int]string{}
	for _, th := range p.Threads {
		byTID[th.TID] = th.Name
		if w := th.WaitingFor; w != nil {
			owner := "?"
			if w.OwnerTID != nil {
				owner = byTID[*w.OwnerTID] + "/" + w.OwnerName
			}
			out[th.Name] = fmt.Sprintf("%s %#x owner %s (%s)", w.Kind, w.Address, owner, w.Note)
		}
	}
	for _, th := range p.Threads {
		if w := th.WaitingFor; w != nil && w.OwnerTID != nil {
			out[th.Name] = strings.Replace(out[th.Name], "owner /", "owner "+byTID[*w.OwnerTID]+"/", 1)
		}
	}
	return out, fmt.Sprint(p.Deadlocks)
}

// The owners of the locks another user's threads wait for, found in the
// child (lock words read there), are those diagnose finds in-process: a
// deadlock of two normal mutexes, of two PI mutexes, and a rwlock held
// for writing.
func TestLocksInChild(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "locks.c")}, "-O2", "-g", "-pthread")
	for _, sc := range [][]string{{"deadlock", "normal"}, {"deadlock", "pi"}, {"rwlock"}} {
		t.Run(strings.Join(sc, "-"), func(t *testing.T) {
			tg := startOther(t, bin, sc...)
			tgt, _ := TargetOf(tg.PID)
			c := startChild(t, liveConfig(), tgt)
			p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
			if err != nil {
				t.Fatal(err)
			}
			boxed, err := c.Resolve(p)
			if err != nil {
				t.Fatal(err)
			}
			tasks := map[int]bool{}
			tids, _ := procmaps.Tasks(tg.PID)
			for _, tid := range tids {
				tasks[tid] = true
			}
			if err := c.Locks(boxed, tasks); err != nil {
				t.Fatal(err)
			}
			_, here := inProcess(p)
			diagnose.Diagnose(here, ptrace.MemReader{PID: p.MemPID()}, tasks)
			bv, bd := lockView(boxed)
			hv, hd := lockView(here)
			if !reflect.DeepEqual(bv, hv) || bd != hd || !boxed.Diagnosed {
				t.Errorf("child:\n %v %s\nhere:\n %v %s", bv, bd, hv, hd)
			}
			owned := 0
			for _, v := range bv {
				if !strings.Contains(v, "owner ?") {
					owned++
				}
			}
			if owned < 2 || (sc[0] == "deadlock" && len(boxed.Deadlocks) != 1) {
				t.Errorf("%d owners found, %d deadlocks: %v", owned, len(boxed.Deadlocks), bv)
			}
			if n := c.calls[kMem]; n != 0 {
				t.Errorf("the child asked the parent for %d memory reads, want none", n)
			}
		})
	}
}

// writeCore captures tg and writes it as an ELF core (stacks only).
func writeCore(t *testing.T, pid int) (string, *ptrace.Process) {
	p, err := ptrace.Capture(pid, ptrace.Options{Mode: ptrace.ModeAuto}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resolve.CollectImages(p, ptrace.MemReader{PID: pid})
	var buf bytes.Buffer
	if err := capfile.WriteCore(&buf, p, capfile.CoreOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.core")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, p
}

// An ELF core read and resolved in the child (the file handed over) gives
// the frames report gives in-process; --tid keeps the threads asked for
// and names the missing ones. A crash there costs the core, nothing else:
// the next child reads it.
func TestCoreInChild(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin)
	path, p := writeCore(t, tg.PID)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	saved, err := capfile.Load(f, st.Size())
	if err != nil || len(saved) != 1 {
		t.Fatalf("load: %v (%d)", err, len(saved))
	}
	here := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{}).Process(saved[0].Process, saved[0].Mem)
	anyone := Target{UID: -1, GID: -1}
	c := startChild(t, Config{}, anyone)
	got, err := c.Core(f, st.Size(), nil)
	if err != nil || len(got) != 1 || got[0].Process == nil {
		t.Fatalf("core in the child: %v %+v", err, got)
	}
	gc, hc := chains(got[0].Process), chains(here)
	if !reflect.DeepEqual(gc, hc) || !strings.Contains(gc["reader"], "reader_c") {
		t.Errorf("child:\n %v\nhere:\n %v", gc, hc)
	}
	tid := p.Threads[len(p.Threads)-1].TID
	got, err = c.Core(f, st.Size(), []int{tid, 1 << 30})
	if err != nil || len(got) != 1 || got[0].Process == nil || len(got[0].Process.Threads) != 1 ||
		got[0].Process.Threads[0].TID != tid || fmt.Sprint(got[0].Missing) != fmt.Sprint([]int{1 << 30}) {
		t.Errorf("--tid %d in the child: %v %+v", tid, err, got)
	}
	// Not a core: the file's fault, said as such.
	junk, _ := os.CreateTemp(t.TempDir(), "junk")
	junk.WriteString("\x7fELF not really")
	if _, err := c.Core(junk, 15, nil); err == nil {
		t.Errorf("a broken core read without error")
	} else if _, ok := err.(*LoadError); !ok {
		t.Errorf("broken core: %T %v, want a *LoadError", err, err)
	}
	TestHook = "core:crash"
	crashing, err := Start(Config{}, anyone)
	TestHook = ""
	if err != nil {
		t.Fatal(err)
	}
	defer crashing.Close()
	if _, err := crashing.Core(f, st.Size(), nil); err == nil || !strings.Contains(err.Error(), "sandboxed parser failed") {
		t.Errorf("a crashing child: %v", err)
	}
}

// Goroutines and lock owners are parsed in the child: when it crashes
// reading them (test hook), the goroutines, or the owners, are lost and
// said so, and the threads' names (read before) stay.
func TestChildParsesGoroutinesAndLocks(t *testing.T) {
	tg := startOther(t, goBin(t, []string{"CGO_ENABLED=0"}), "-park", "3")
	tgt, _ := TargetOf(tg.PID)
	for _, hook := range []string{"go:crash", "locks:crash"} {
		TestHook = hook
		c, err := Start(liveConfig(), tgt)
		TestHook = ""
		if err != nil {
			t.Fatal(err)
		}
		p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeNoStop}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := c.Resolve(p)
		if err != nil {
			t.Fatal(err)
		}
		named := false
		for _, th := range rp.Threads {
			for _, f := range th.Frames {
				named = named || strings.HasPrefix(f.Function, "runtime.")
			}
		}
		if hook == "go:crash" {
			err = c.Goroutines(p, rp)
			if err == nil || rp.Runtime != nil || rp.Goroutines != nil || !named {
				t.Errorf("%s: %v, runtime %v, %d goroutines, threads named %v", hook, err, rp.Runtime, len(rp.Goroutines), named)
			}
		} else {
			err = c.Locks(rp, map[int]bool{tg.PID: true})
			if err == nil || rp.Diagnosed || !named {
				t.Errorf("%s: %v, diagnosed %v, threads named %v", hook, err, rp.Diagnosed, named)
			}
		}
		if err != nil && !strings.Contains(err.Error(), "test hook") {
			t.Errorf("%s: %v, want the child's panic named", hook, err)
		}
		c.Close()
	}
}
