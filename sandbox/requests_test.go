//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
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
//
// Asked after Resolve (kGo) or done by the child right after its resolve
// answer (ResolveThen), the goroutines are the same.
func TestGoroutinesInChild(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
		then  bool
	}{{"symbols", nil, false}, {"stripped", []string{"-ldflags=-s -w"}, false}, {"symbols-then", nil, true}, {"stripped-then", []string{"-ldflags=-s -w"}, true}} {
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
			resolved := c.Resolve
			if v.then {
				resolved = func(p *ptrace.Process) (*report.Process, error) {
					return c.ResolveThen(p, Then{Locks: true, Tasks: func() map[int]bool { return map[int]bool{} }, Goroutines: true})
				}
			}
			boxed, err := resolved(p)
			if err != nil {
				t.Fatal(err)
			}
			c.Goroutines(p, boxed)
			if want := map[bool]int{false: 1, true: 0}[v.then]; c.asked[kGo] != want {
				t.Errorf("%d goroutine requests, want %d", c.asked[kGo], want)
			}
			res, here := inProcess(p)
			space := res.Space(p, ptrace.MemReader{PID: p.MemPID()})
			goruntime.Live(p, here, goruntime.SymbolizerFunc(res.Namer(space)), time.Time{}, nil)
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
//
// Asked after Resolve (kLocks) or done by the child right after its
// resolve answer (ResolveThen, "then"), the owners are the same.
func TestLocksInChild(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "locks.c")}, "-O2", "-g", "-pthread")
	for _, sc := range [][]string{{"deadlock", "normal"}, {"deadlock", "pi"}, {"rwlock"}, {"deadlock", "normal", "then"}, {"rwlock", "then"}} {
		t.Run(strings.Join(sc, "-"), func(t *testing.T) {
			then := sc[len(sc)-1] == "then"
			if then {
				sc = sc[:len(sc)-1]
			}
			tg := startOther(t, bin, sc...)
			tgt, _ := TargetOf(tg.PID)
			c := startChild(t, liveConfig(), tgt)
			p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
			if err != nil {
				t.Fatal(err)
			}
			tasks := procmaps.TaskSet(tg.PID)
			var boxed *report.Process
			if then {
				// The tasks are listed once the request has gone,
				// and follow it (kTasks).
				listed := 0
				list := func() map[int]bool {
					if listed++; c.asked[kResolve] != 1 || c.asked[kTasks] != 0 {
						t.Errorf("tasks listed after %d resolve requests, %d task frames", c.asked[kResolve], c.asked[kTasks])
					}
					return tasks
				}
				boxed, err = c.ResolveThen(p, Then{Locks: true, Tasks: list, Goroutines: true})
				if listed != 1 || c.asked[kTasks] != 1 {
					t.Errorf("tasks listed %d times, sent %d times; want once", listed, c.asked[kTasks])
				}
			} else {
				boxed, err = c.Resolve(p)
			}
			if err != nil {
				t.Fatal(err)
			}
			c.Locks(boxed, tasks)
			if want := map[bool]int{false: 1, true: 0}[then]; c.asked[kLocks] != want {
				t.Errorf("%d lock requests, want %d", c.asked[kLocks], want)
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

// An ELF core and a capture file, read and resolved in the child (the
// file handed over), give the frames report gives in-process; --tid
// keeps the threads asked for and names the missing ones; a file that is
// no capture is the file's fault. A crash there costs the file, said so.
func TestSavedInChild(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, bin)
	core, p := writeCore(t, tg.PID)
	var buf bytes.Buffer
	if err := capfile.Encode(&buf, &capfile.File{Processes: []*ptrace.Process{p}}); err != nil {
		t.Fatal(err)
	}
	capFile := filepath.Join(t.TempDir(), "t.cap")
	if err := os.WriteFile(capFile, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	anyone := Target{UID: -1, GID: -1}
	c := startChild(t, Config{}, anyone)
	tid := p.Threads[len(p.Threads)-1].TID
	for _, path := range []string{core, capFile} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		all, err := capfile.Load(f, st.Size())
		if err != nil || len(all) != 1 {
			t.Fatalf("load: %v (%d)", err, len(all))
		}
		here := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{}).Process(all[0].Process, all[0].Mem)
		got, err := c.Saved(f, st.Size(), nil)
		if err != nil || len(got.Procs) != 1 || got.Failed != 0 || len(got.Lines) != 0 {
			t.Fatalf("%s in the child: %v %+v", path, err, got)
		}
		gc, hc := chains(got.Procs[0]), chains(here)
		if !reflect.DeepEqual(gc, hc) || !strings.Contains(gc["reader"], "reader_c") {
			t.Errorf("%s: child:\n %v\nhere:\n %v", path, gc, hc)
		}
		got, err = c.Saved(f, st.Size(), []int{tid, 1 << 30})
		if err != nil || len(got.Procs) != 1 || len(got.Procs[0].Threads) != 1 || got.Procs[0].Threads[0].TID != tid ||
			len(got.Lines) != 1 || !strings.Contains(got.Lines[0], fmt.Sprintf("no thread %d in process %d", 1<<30, p.PID)) {
			t.Errorf("%s --tid %d in the child: %v %+v", path, tid, err, got)
		}
	}
	// Not a capture: the file's fault, said as such.
	for _, junk := range []string{"\x7fELF not really", "not a capture at all"} {
		f, _ := os.CreateTemp(t.TempDir(), "junk")
		f.WriteString(junk)
		_, err := c.Saved(f, int64(len(junk)), nil)
		var le *LoadError
		if !errors.As(err, &le) || errors.Is(err, capfile.ErrNotCapture) != (junk[0] != 0x7f) {
			t.Errorf("%q: %T %v, want a *LoadError (not a capture: %v)", junk, err, err, junk[0] != 0x7f)
		}
		f.Close()
	}
	TestHook = "saved:crash"
	crashing, err := Start(Config{}, anyone)
	TestHook = ""
	if err != nil {
		t.Fatal(err)
	}
	defer crashing.Close()
	f, _ := os.Open(core)
	defer f.Close()
	got, err := crashing.Saved(f, 1<<20, nil)
	if err != nil || got.Failed != 1 || len(got.Procs) != 0 || len(got.Lines) != 1 ||
		!strings.Contains(got.Lines[0], core+" not shown: the sandboxed parser failed") {
		t.Errorf("a crashing child: %v %+v", err, got)
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
		var warned string
		if hook == "go:crash" {
			c.Goroutines(p, rp)
			if rp.Runtime != nil || rp.Goroutines != nil || !named {
				t.Errorf("%s: runtime %v, %d goroutines, threads named %v", hook, rp.Runtime, len(rp.Goroutines), named)
			}
			warned = "goroutines not read: the sandboxed parser failed"
		} else {
			c.Locks(rp, map[int]bool{tg.PID: true})
			if rp.Diagnosed || !named {
				t.Errorf("%s: diagnosed %v, threads named %v", hook, rp.Diagnosed, named)
			}
			warned = "lock owners not found: the sandboxed parser failed"
		}
		if w := strings.Join(rp.Warnings, "\n"); !strings.Contains(w, warned) || !strings.Contains(w, "test hook") {
			t.Errorf("%s: warnings %q, want %q and the child's panic", hook, w, warned)
		}
		c.Close()
	}
}

// The child may open a file the parent's fetcher gave for a build id it
// asked for, and only then; a build id that is not hex is not fetched.
func TestFetchPolicy(t *testing.T) {
	private := filepath.Join(t.TempDir(), "debuginfo")
	if err := os.WriteFile(private, []byte("x"), 0o400); err != nil {
		t.Fatal(err)
	}
	var asked []string
	fds := socketPair(t)
	c := &Child{sock: fds[0], t: Target{UID: -1, GID: -1}, down: newDownWriter()}
	c.cfg.Symtab.FetchDebug = func(_ context.Context, id string) (string, error) {
		asked = append(asked, id)
		return private, nil
	}
	open := func() error {
		f, err := c.open(&upMsg{Kind: kOpen, Path: private, Follow: true})
		if f != nil {
			f.Close()
		}
		return err
	}
	if open() == nil && os.Geteuid() == 0 {
		t.Fatalf("a private file was handed over before it was fetched")
	}
	for _, id := range []string{"../../etc", "abc/", ""} {
		if err := c.fetch(&upMsg{Kind: kFetch, BuildID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if len(asked) != 0 {
		t.Fatalf("fetched bad build ids %q", asked)
	}
	if err := c.fetch(&upMsg{Kind: kFetch, BuildID: "abcd01"}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(asked) != "[abcd01]" {
		t.Fatalf("fetched %q", asked)
	}
	if err := open(); err != nil {
		t.Errorf("the fetched file: %v", err)
	}
	// The answers went to the child's end: one refusal per bad id, then
	// the path.
	r := newDownReader()
	for i, want := range []string{"fetch refused", "fetch refused", "fetch refused", ""} {
		m, _, err := r.recv(fds[1])
		if err != nil || m.Err != want || (want == "" && m.Path != private) {
			t.Errorf("answer %d: %+v %v", i, m, err)
		}
	}
}
