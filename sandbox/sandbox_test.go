//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/diskcache"
	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// The test binary is the child's image too: re-executed as ChildCommand,
// it runs the child.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildCommand {
		os.Exit(Main())
	}
	Prepare()
	os.Exit(m.Run())
}

// otherUser is the uid tests run their targets as: not root, not nobody.
const otherUser = 1000

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.Skip(t, "needs root: the child changes to an unprivileged user")
	}
}

// startAsOther starts blocked.c as otherUser, the service account a root
// stackshot dumps.
func startAsOther(t *testing.T, args ...string) *testutil.Target {
	return startTargetAsOther(t, "blocked.c", args...)
}

// startTargetAsOther is startAsOther for the C target src of testdata.
func startTargetAsOther(t *testing.T, src string, args ...string) *testutil.Target {
	needRoot(t)
	setpriv := testutil.Need(t, "setpriv")
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", src)}, "-O2", "-g", "-pthread")
	tg := testutil.Start(t, setpriv, append([]string{"--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--", bin}, args...)...)
	if st, err := procmaps.ReadStatus(tg.PID); err != nil || st.UIDs[1] != otherUser {
		t.Fatalf("target runs as %+v (%v), want uid %d", st.UIDs, err, otherUser)
	}
	return tg
}

func liveConfig() Config {
	return Config{Resolve: resolve.Options{Live: true}}
}

func startChild(t *testing.T, cfg Config, tgt Target) *Child {
	t.Helper()
	c, err := Start(cfg, tgt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The child collects garbage as its parent asks (a dump: less often),
// else as Go does by default.
func TestChildGCPercent(t *testing.T) {
	needRoot(t)
	for _, c := range []struct{ set, want int }{{0, 100}, {400, 400}} {
		cfg := liveConfig()
		cfg.GCPercent = c.set
		child := startChild(t, cfg, Target{UID: -1, GID: -1})
		got, err := child.Probe("gogc")
		if err != nil || got != strconv.Itoa(c.want) {
			t.Errorf("GCPercent %d: the child's GOGC %q (%v), want %d", c.set, got, err, c.want)
		}
	}
}

// chains is each thread's frames (function and PC), by thread name.
func chains(p *report.Process) map[string]string {
	return chainsOf(p, func(f report.Frame) string { return fmt.Sprintf("%s@%x", f.Function, f.PC) })
}

func chainsOf(p *report.Process, text func(report.Frame) string) map[string]string {
	out := map[string]string{}
	for _, th := range p.Threads {
		var fs []string
		for _, f := range th.Frames {
			fs = append(fs, text(f))
		}
		out[th.Name] = strings.Join(fs, " <- ")
	}
	return out
}

// A dump of another user's process through the child gives the frames
// the in-process symbolizer gives, also when the capture's no-stop check
// runs in the child, thread by thread or all at once (then the resolve
// does not send again the stacks the check sent), and with a spinning
// thread, which the check cannot pass: it is stopped, and its new stack
// is sent with the resolve.
func TestSameFramesAsInProcess(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("checkall=%v", all), func(t *testing.T) { sameFramesAsInProcess(t, all) })
	}
	t.Run("checkall=true/spin", func(t *testing.T) { sameFramesAsInProcess(t, true, "spin") })
}

func sameFramesAsInProcess(t *testing.T, all bool, args ...string) {
	tg := startAsOther(t, args...)
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	if !Needed(tg.PID) && !Forced() {
		t.Fatalf("Needed(%d) = false for a target of uid %d", tg.PID, tgt.UID)
	}
	c := startChild(t, liveConfig(), tgt)
	mem := ptrace.MemReader{PID: tg.PID}
	opt, check := ptrace.Options{Mode: ptrace.ModeAuto}, c.Check()
	if all {
		opt.CheckAll, check = c.CheckAll(), nil
	}
	p, err := ptrace.Capture(tg.PID, opt, check)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, th := range p.Threads {
		if h, ok := c.checked[th.TID]; ok && th.Method == ptrace.MethodNoStop && len(th.Stack) > 0 && &h.stack[0] == &th.Stack[0] {
			held++
		}
	}
	if all && held < 7 || !all && held != 0 {
		t.Errorf("the child holds %d of the threads' stacks from the check", held)
	}
	// The check's module files (libc, the executable) came with it
	// (giveModules): the child asked for none.
	if n := c.calls[kOpen]; all && n != 0 || !all && n == 0 {
		t.Errorf("the child asked for %d files during the check (checkall=%v)", n, all)
	}
	got, err := c.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.checked != nil {
		t.Error("the stacks the check sent are still counted on after the resolve")
	}
	// The build ids and vdso the child read are the ones read here.
	if len(p.BuildIDs) < 2 || len(p.VDSO) == 0 {
		t.Fatalf("child's images: %d build ids, %d-byte vdso", len(p.BuildIDs), len(p.VDSO))
	}
	mine := &ptrace.Process{PID: p.PID, Maps: p.Maps}
	resolve.CollectImages(mine, mem)
	if fmt.Sprint(mine.BuildIDs) != fmt.Sprint(p.BuildIDs) || string(mine.VDSO) != string(p.VDSO) {
		t.Errorf("build ids from the child %v, here %v (vdso equal: %v)", p.BuildIDs, mine.BuildIDs, string(mine.VDSO) == string(p.VDSO))
	}
	want := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true}).Process(p, mem)
	gc, wc := chains(got), chains(want)
	if len(gc) != len(wc) || len(wc) < 7 {
		t.Fatalf("threads: sandbox %d, in-process %d", len(gc), len(wc))
	}
	for name, w := range wc {
		if gc[name] != w {
			t.Errorf("thread %s:\n sandbox    %s\n in-process %s", name, gc[name], w)
		}
	}
	// Every field of every thread, not only the chains: the parent builds
	// each thread's head from its capture and takes the rest from the
	// child's answer (frames.go), and nothing is lost on the way.
	if !reflect.DeepEqual(got.Threads, want.Threads) {
		for i := range want.Threads {
			if i < len(got.Threads) && !reflect.DeepEqual(got.Threads[i], want.Threads[i]) {
				t.Errorf("thread %d:\n sandbox    %+v\n in-process %+v", want.Threads[i].TID, got.Threads[i], want.Threads[i])
			}
		}
	}
	for _, th := range got.Threads {
		if th.Name == "reader" && !strings.Contains(gc["reader"], "reader_c") {
			t.Errorf("reader thread without reader_c: %s", gc["reader"])
		}
		if th.Error != "" {
			t.Errorf("thread %s: %s", th.Name, th.Error)
		}
	}
	if !strings.Contains(gc["condwait"], "cond_a") || !strings.Contains(gc[p.Comm], "main_wait") {
		t.Errorf("expected chains missing: %v", gc)
	}
	if len(args) > 0 && !strings.Contains(gc["spinner"], "spin_c") {
		t.Errorf("spinner: %s", gc["spinner"])
	}
	for _, th := range p.Threads {
		if th.Name == "spinner" && th.Method != ptrace.MethodPtrace {
			t.Errorf("the spinner was captured %s, not stopped", th.Method)
		}
	}
	if len(args) > 0 {
		// The capture kept this process's threads off the spinner's CPU;
		// a capture of a process with no running thread lets them back
		// (TestChildKeepsOffBusyCPUs needs two CPUs to start from).
		quiet := startAsOther(t)
		if _, err := ptrace.Capture(quiet.PID, ptrace.Options{Mode: ptrace.ModeNoStop}, nil); err != nil {
			t.Fatal(err)
		}
		var set unix.CPUSet
		if unix.SchedGetaffinity(0, &set) == nil && set.Count() < runtime.NumCPU() {
			t.Errorf("%d CPUs allowed after a capture of a process with no running thread, of %d", set.Count(), runtime.NumCPU())
		}
	}
}

// The child runs as a uid and gid of its own (in the reserved range, no
// other process's, neither nobody's nor the target's), is not dumpable,
// has no_new_privs and a seccomp filter, and an open() in it fails with
// EPERM.
func TestChildIsUnprivileged(t *testing.T) {
	tg := startAsOther(t)
	tgt, _ := TargetOf(tg.PID)
	c := startChild(t, liveConfig(), tgt)
	uid, gid, ok := c.IDs()
	if !ok || uid != gid || uid < childIDBase || uid >= childIDBase+childIDCount {
		t.Fatalf("child ids %d %d (%v), want one in %d..%d", uid, gid, ok, childIDBase, childIDBase+childIDCount-1)
	}
	if others := processesWithID(t, uid, c.PID()); len(others) > 0 {
		t.Errorf("uid/gid %d is also that of processes %v", uid, others)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.PID()))
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	t.Logf("child VmSize %s, VmRSS %s", status["VmSize"], status["VmRSS"])
	id := fmt.Sprint(uid)
	for k, want := range map[string]string{
		"Uid": strings.Repeat(id+" ", 3) + id, "Gid": strings.Repeat(id+" ", 3) + id,
		"Groups": "", "NoNewPrivs": "1", "Seccomp": "2", "Seccomp_filters": "1", "CapEff": "0000000000000000", "CapPrm": "0000000000000000",
	} {
		if status[k] != want {
			t.Errorf("child %s: %q, want %q", k, status[k], want)
		}
	}
	// Not dumpable: its /proc files belong to root, not to its user.
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/status", c.PID()), &st); err != nil || st.Uid != 0 {
		t.Errorf("child's /proc entry owned by uid %d (%v): it is dumpable", st.Uid, err)
	}
	for _, call := range []string{"open", "exec", "socket", "ptrace", "vm_readv"} {
		got, err := c.Probe(call)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, unix.EPERM.Error()) {
			t.Errorf("%s in the child: %q, want %v", call, got, unix.EPERM)
		}
	}
	// Its only descriptors: stdin/stdout (/dev/null), stderr (a pipe to
	// the parent) and the socket.
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 4 {
		var names []string
		for _, e := range ents {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", c.PID(), e.Name()))
			names = append(names, e.Name()+"="+l)
		}
		t.Errorf("child descriptors: %v", names)
	}
}

// The child's threads keep off the CPU of the target's running thread
// with the parent's, from the capture that stops it on.
func TestChildKeepsOffBusyCPUs(t *testing.T) {
	busy, started := testutil.BusyCPU(t)
	tg := startAsOther(t, "spin")
	tgt, _ := TargetOf(tg.PID)
	c := startChild(t, liveConfig(), tgt)
	testutil.PinRunning(t, tg.PID, "spinner", busy)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto}, c.Check())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(p); err != nil {
		t.Fatal(err)
	}
	masks := testutil.CPUMasks(t, c.PID())
	if len(masks) < 2 {
		t.Fatalf("the child has %d threads", len(masks))
	}
	for tid, set := range masks {
		if set.IsSet(busy) || set.Count() != started.Count()-1 {
			t.Errorf("child thread %d: %d CPUs, CPU %d in its mask: %v; want every CPU but %d", tid, set.Count(), busy, set.IsSet(busy), busy)
		}
	}
}

// The parent hands the child only what the target could read: a root-only
// file is refused, a world-readable one given, another process's files
// refused.
func TestParentOpenPolicy(t *testing.T) {
	tg := startAsOther(t)
	tgt, _ := TargetOf(tg.PID)
	c := startChild(t, liveConfig(), tgt)
	dir := searchableTempDir(t)
	secret := dir + "/secret"
	if err := os.WriteFile(secret, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	public := dir + "/public"
	if err := os.WriteFile(public, []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := procmaps.RootPath(tg.PID)
	for _, tc := range []struct {
		m  upMsg
		ok bool
	}{
		{upMsg{Kind: kOpen, Path: secret, Follow: true}, false},
		{upMsg{Kind: kOpen, Root: root, Path: secret, Follow: true}, false},
		{upMsg{Kind: kOpen, Path: public, Follow: true}, true},
		{upMsg{Kind: kOpen, Root: root, Path: public, Follow: true}, true},
		{upMsg{Kind: kOpen, Root: procmaps.RootPath(os.Getpid()), Path: public, Follow: true}, false},
		{upMsg{Kind: kOpen, Path: symtab.KallsymsPath, Follow: true}, true},
		{upMsg{Kind: kPerfMap, PID: os.Getpid(), Root: procmaps.RootPath(os.Getpid())}, false},
	} {
		f, err := c.open(&tc.m)
		if f != nil {
			f.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("open %+v: %v, want ok=%v", tc.m, err, tc.ok)
		}
	}
	// Candidates are each held to the same: the first the target could
	// read is the one opened, in one call.
	for _, tc := range []struct {
		cands []symtab.Candidate
		want  int // -1: none
	}{
		{[]symtab.Candidate{{Root: "", Path: secret}, {Root: root, Path: secret}, {Root: "", Path: dir + "/missing"}, {Root: root, Path: public}, {Root: "", Path: public}}, 3},
		{[]symtab.Candidate{{Root: procmaps.RootPath(os.Getpid()), Path: public}, {Root: "", Path: public}}, 1},
		{[]symtab.Candidate{{Root: "", Path: secret}, {Root: "", Path: dir + "/missing"}}, -1},
		{make([]symtab.Candidate, maxCands+1), -1},
	} {
		f, i, err := c.openFirst(&upMsg{Kind: kOpen, Cands: tc.cands})
		if f != nil {
			f.Close()
		}
		if tc.want < 0 && err == nil || tc.want >= 0 && (err != nil || i != tc.want) {
			t.Errorf("open the first of %v: %d %v, want %d", tc.cands, i, err, tc.want)
		}
	}
}

// A crash of the child, or its memory limit, costs the process its names:
// its threads come back unresolved, with the reason; the next child works.
func TestChildFailureCostsNames(t *testing.T) {
	tg := startAsOther(t)
	tgt, _ := TargetOf(tg.PID)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeNoStop}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ hook, why string }{
		{"crash", "the sandboxed child crashes"},
		{"oom", "out of memory"},
	} {
		t.Run(tc.hook, func(t *testing.T) {
			TestHook = tc.hook
			cfg := liveConfig()
			cfg.MemoryLimit = 2 << 30 // Go reserves about 1.5 GiB of address space at start
			c, err := Start(cfg, tgt)
			TestHook = ""
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rp, err := c.Resolve(p)
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %v, want one saying %q", err, tc.why)
			}
			t.Logf("%v", err)
			if len(rp.Threads) != len(p.Threads) {
				t.Fatalf("%d threads of %d", len(rp.Threads), len(p.Threads))
			}
			for _, th := range rp.Threads {
				var user []report.Frame
				for _, f := range th.Frames {
					if f.Kind == "user" {
						user = append(user, f)
					}
				}
				if th.Error == "" || len(user) != 1 || user[0].Function != "" || user[0].PC == 0 {
					t.Errorf("thread %s: %q %+v, want its PC unresolved, with the reason", th.Name, th.Error, th.Frames)
				}
				if th.Syscall == nil || th.Syscall.Name == "" {
					t.Errorf("thread %s: syscall %+v, want it named (no parsing needed)", th.Name, th.Syscall)
				}
			}
			if _, err := c.Resolve(p); err == nil {
				t.Errorf("a failed child answered again")
			}
		})
	}
	c := startChild(t, liveConfig(), tgt)
	rp, err := c.Resolve(p)
	if err != nil || !strings.Contains(chains(rp)["reader"], "reader_c") {
		t.Fatalf("a new child: %v %v", err, chains(rp))
	}
}

// A child still working past the deadline (--timeout) and its grace is
// killed: the wait is bounded, the process's names are lost and the error
// says why.
func TestChildKilledAtDeadline(t *testing.T) {
	tg := startAsOther(t)
	tgt, _ := TargetOf(tg.PID)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeNoStop}, nil)
	if err != nil {
		t.Fatal(err)
	}
	TestHook = "hang"
	c, err := Start(liveConfig(), tgt)
	TestHook = ""
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// (set once it has started: its start is bounded by the deadline too)
	c.cfg.Deadline = time.Now().Add(-grace + 500*time.Millisecond)
	rp, err := c.Resolve(p)
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("error %v, want the deadline", err)
	}
	if len(rp.Threads) != len(p.Threads) || rp.Threads[0].Error == "" {
		t.Fatalf("threads %+v", rp.Threads)
	}
}

// A child past its CPU time (RLIMIT_CPU) is killed by the kernel, and the
// error says so.
func TestChildCPULimit(t *testing.T) {
	needRoot(t)
	cfg := liveConfig()
	cfg.CPUSeconds = 1
	// A wall-clock kill far off: on a loaded machine the child can take
	// much more than twice its CPU limit in wall time to use it up.
	cfg.Deadline = time.Now().Add(2 * time.Minute)
	c := startChild(t, cfg, Target{UID: -1, GID: -1})
	_, err := c.Probe("spin")
	if err == nil || !strings.Contains(err.Error(), "CPU time limit (1 s)") {
		t.Fatalf("spinning child: %v, want the CPU time limit", err)
	}
}

// Run by hand, without its parent's socket, the hidden command refuses.
func TestChildRefusedByHand(t *testing.T) {
	cmd := exec.Command("/proc/self/exe", ChildCommand)
	cmd.Path = os.Args[0]
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err == nil || !errorsAs(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "not a command") {
		t.Fatalf("ran by hand: %v %q", err, out)
	}
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// The child is for other users' processes and for containers (another
// mount namespace), not for stackshot's own processes; the environment
// overrides both ways.
func TestNeeded(t *testing.T) {
	needRoot(t)
	own := testutil.Start(t, testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread"))
	t.Setenv("STACKSHOT_SANDBOX", "")
	if Needed(own.PID) {
		t.Errorf("Needed(own process) = true")
	}
	other := startAsOther(t)
	if !Needed(other.PID) {
		t.Errorf("Needed(another user's process) = false")
	}
	if unshare, err := exec.LookPath("unshare"); err == nil {
		bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
		ns := testutil.Start(t, unshare, "--mount", "--", bin)
		if !Needed(ns.PID) {
			t.Errorf("Needed(process in another mount namespace) = false")
		}
	}
	t.Setenv("STACKSHOT_SANDBOX", "1")
	if !Needed(own.PID) {
		t.Errorf("STACKSHOT_SANDBOX=1: Needed(own process) = false")
	}
	t.Setenv("STACKSHOT_SANDBOX", "0")
	if Needed(other.PID) {
		t.Errorf("STACKSHOT_SANDBOX=0: Needed(another user's process) = true")
	}
}

// socketPair is a connected unix stream pair, closed when the test ends.
func socketPair(t testing.TB) [2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return [2]int(fds)
}

// Strings of any bytes cross from the child to the parent unchanged
// (JSON would turn invalid UTF-8 into U+FFFD).
func TestRawStringsRoundTrip(t *testing.T) {
	names := []string{"plain", "\xff\xfe bad", "\x1b[2J", "\uffffAAAA", "\uffff", "é\u202e", ""}
	fds := socketPair(t)
	p := &report.Process{Comm: names[1], Exe: names[3]}
	for _, n := range names {
		p.Threads = append(p.Threads, report.Thread{Name: n, Frames: []report.Frame{{Function: n, File: n}}})
	}
	go sendUp(fds[1], &upMsg{Kind: kResolve, Result: p, Path: names[1]})
	m, err := recvUp(fds[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != names[1] || m.Result.Comm != names[1] || m.Result.Exe != names[3] {
		t.Errorf("got path %q comm %q exe %q", m.Path, m.Result.Comm, m.Result.Exe)
	}
	for i, n := range names {
		th := m.Result.Threads[i]
		if th.Name != n || th.Frames[0].Function != n || th.Frames[0].File != n {
			t.Errorf("%q came back as %q / %q / %q", n, th.Name, th.Frames[0].Function, th.Frames[0].File)
		}
	}
}

// The threads' stack copies travel after the encoded request, from where
// the capture holds them, and come back as they went, in the child's
// frame; the message sent is left as it was, and a frame whose stacks do
// not add up is refused.
func TestStacksRoundTrip(t *testing.T) {
	fds := socketPair(t)
	stack := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	m := &downMsg{Kind: kResolve,
		Proc:    &ptrace.Process{PID: 7, Threads: []ptrace.Thread{{TID: 7, Stack: stack(300<<10, 1)}, {TID: 8}, {TID: 9, Stack: stack(5, 2)}}},
		Thread:  &ptrace.Thread{TID: 10, Stack: stack(3, 3)},
		Threads: []ptrace.Thread{{TID: 11, Stack: stack(4<<20, 4)}},
		Check:   []*ptrace.Thread{{TID: 12, Stack: stack(1, 5)}, {TID: 13}},
	}
	want := stackSlots(m)
	w, r := newDownWriter(), newDownReader()
	go w.send(fds[0], m, -1)
	got, _, err := r.recv(fds[1])
	if err != nil {
		t.Fatal(err)
	}
	slots := stackSlots(got)
	if len(slots) != len(want) || got.Proc.PID != 7 || got.Thread.TID != 10 || got.Check[1].TID != 13 {
		t.Fatalf("%d stacks (want %d), %+v", len(slots), len(want), got)
	}
	for i := range want {
		if !bytes.Equal(*slots[i], *want[i]) {
			t.Errorf("stack %d: %d bytes, want %d", i, len(*slots[i]), len(*want[i]))
		}
	}
	if len(m.Proc.Threads[0].Stack) != 300<<10 || len(m.Check[0].Stack) != 1 {
		t.Error("sending took the stacks off the message sent")
	}
	// More stacks than one sendmsg takes buffers (maxIovecs).
	many := &downMsg{Kind: kResolve, Proc: &ptrace.Process{PID: 7}}
	for i := range 3*maxIovecs + 5 {
		many.Proc.Threads = append(many.Proc.Threads, ptrace.Thread{TID: i, Stack: stack(i%50, byte(i))})
	}
	go newDownWriter().send(fds[0], many, -1) // (w: not known to be done with m)
	if got, _, err := r.recv(fds[1]); err != nil || len(got.Proc.Threads) != len(many.Proc.Threads) {
		t.Fatalf("%d threads: %v", len(many.Proc.Threads), err)
	} else {
		for i, th := range got.Proc.Threads {
			if !bytes.Equal(th.Stack, many.Proc.Threads[i].Stack) {
				t.Fatalf("thread %d: stack %v, want %v", i, th.Stack, many.Proc.Threads[i].Stack)
			}
		}
	}
	// The same frame as sent, its stacks cut short, or a byte too many.
	payload := func() []byte {
		go newDownWriter().send(fds[0], m, -1)
		b, _, err := recvFrame(fds[1], maxDown)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, tc := range map[string]struct {
		mutate func([]byte) []byte
		ok     bool
	}{
		"as sent":         {func(b []byte) []byte { return b }, true},
		"cut short":       {func(b []byte) []byte { return b[:len(b)-1] }, false},
		"a byte too many": {func(b []byte) []byte { return append(b, 0) }, false},
	} {
		if _, err := newDownReader().decode(tc.mutate(payload())); (err == nil) != tc.ok {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A cache entry's bytes travel as they are, and come back whole: a frame
// cut short, or with a byte more, is refused.
func TestCachePutBytesRoundTrip(t *testing.T) {
	fds := socketPair(t)
	data := []byte("\x00\xff{\"k\":\"open\"}\n" + strings.Repeat("x", 100<<10))
	k := &diskcache.Key{Kind: "symbols", BuildID: "abcd"}
	for _, d := range [][]byte{data, {}} {
		m := &upMsg{Kind: kCachePut, Key: k, Data: d}
		sent := make(chan error)
		go func() { sent <- sendUp(fds[1], m) }()
		got, err := recvUp(fds[0], 0)
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		if err != nil || got.Kind != kCachePut || !bytes.Equal(got.Data, d) || got.Key == nil || *got.Key != *k {
			t.Fatalf("%d bytes: came back as %v %q (%d bytes)", len(d), err, got.Kind, len(got.Data))
		}
	}
	b := encodeValue(nil, &upMsg{Kind: kCachePut, Key: k, Data: data})
	for _, frame := range [][]byte{b[:len(b)-1], append(b, 0)} {
		go sendFrame(fds[1], frame, -1)
		if m, err := recvUp(fds[0], 0); err == nil {
			t.Errorf("a frame of %d bytes (%d sent) accepted (%d bytes)", len(frame), len(b), len(m.Data))
		}
	}
}

// The child is killed with stackshot (its parent-death signal), and the
// kernel sends that signal when the thread that started it exits, not the
// process: stackshot's tracer threads exit on purpose after a capture. A
// child started from a thread that then exits must live on.
func TestChildOutlivesItsStartingThread(t *testing.T) {
	tg := startAsOther(t)
	tgt, _ := TargetOf(tg.PID)
	got := make(chan *Launching)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		got <- Launch(liveConfig(), tgt)
	}()
	l := <-got
	c := l.Child("the target", func(s string) { t.Fatal(s) })
	defer c.Close()
	time.Sleep(100 * time.Millisecond) // (the starting thread's exit)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeNoStop}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(p); err != nil {
		t.Fatalf("the child did not outlive the thread that started it: %v", err)
	}
}

// Requests that come while the child waits for the reply to one of its
// calls (a capture sends its checks without waiting) are kept, with their
// descriptors, and served next, in order; past maxEarly the call fails.
func TestEarlyRequestsKept(t *testing.T) {
	fds := socketPair(t)
	cl := &client{sock: fds[1], down: newDownReader()}
	parent := newDownWriter()
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	given := int(f.Fd())
	go func() {
		if m, err := recvUp(fds[0], 0); err != nil || m.Kind != kOpen {
			t.Errorf("the call came as %v, %v", m, err)
		}
		parent.send(fds[0], &downMsg{Kind: kCheckAll, Check: []*ptrace.Thread{{TID: 1, Stack: []byte{1, 2}}}}, -1)
		parent.send(fds[0], &downMsg{Kind: kGive, Path: "/x"}, given)
		parent.send(fds[0], &downMsg{Kind: kCheckAll, Check: []*ptrace.Thread{{TID: 2}}}, -1)
		parent.send(fds[0], &downMsg{Kind: kReply, Index: 3}, -1)
	}()
	r, fd, err := cl.call(&upMsg{Kind: kOpen, Path: "/y"})
	if err != nil || r.Kind != kReply || r.Index != 3 || fd >= 0 {
		t.Fatalf("call: %+v, fd %d, %v", r, fd, err)
	}
	for i, want := range []string{kCheckAll, kGive, kCheckAll} {
		m, fd, err := cl.next()
		if err != nil || m.Kind != want || (fd >= 0) != (want == kGive) {
			t.Fatalf("request %d: %+v, fd %d, %v (want %s)", i, m, fd, err, want)
		}
		if fd >= 0 {
			unix.Close(fd)
		}
		if i == 0 && (len(m.Check) != 1 || m.Check[0].TID != 1 || !bytes.Equal(m.Check[0].Stack, []byte{1, 2})) {
			t.Errorf("first check: %+v", m.Check)
		}
	}
	// More early requests than kept: the call fails.
	go func() {
		recvUp(fds[0], 0)
		w := newDownWriter() // (the first goroutine's is not known to be done with)
		for range maxEarly + 1 {
			w.send(fds[0], &downMsg{Kind: kCheckAll}, -1)
		}
	}()
	if _, _, err := cl.call(&upMsg{Kind: kOpen, Path: "/y"}); err == nil {
		t.Errorf("a call answered by %d requests: no error", maxEarly+1)
	}
}

// A child of root becomes its unprivileged user itself, before it reads
// anything from its parent: until then it is root, which no process of
// that user may trace, and after it is not dumpable. Started as that user
// (as it was), it was dumpable until its lockdown: any process of its user's
// could attach to it then and receive what the parent hands it (with the
// first checks sent while it starts, the target's memory file and
// stacks). The test pauses the child before and after the change (test
// environment) and watches its /proc entry throughout.
func TestChildNeverTraceableWhileStarting(t *testing.T) {
	needRoot(t)
	TestEnv = []string{"STACKSHOT_TEST_CHILD_PAUSE_ROOT=200ms", "STACKSHOT_TEST_CHILD_PAUSE_USER=200ms"}
	l := Launch(liveConfig(), Target{UID: -1, GID: -1})
	c := l.Early()
	TestEnv = nil
	if c == nil {
		l.Child("the target", func(s string) { t.Fatal(s) })
	}
	ready := make(chan *Child)
	go func() { ready <- l.Child("the target", func(s string) { t.Error(s) }) }()
	seen := map[string]int{}
	var order []string
	for done := false; !done; {
		select {
		case got := <-ready:
			if got == nil {
				t.Fatal("the child did not start")
			}
			defer got.Close()
			done = true
			// Its threads, gathered on one CPU for the change
			// (ptrace.Gather), have the mask they started with again.
			var mask unix.CPUSet
			unix.SchedGetaffinity(0, &mask)
			for tid, set := range testutil.CPUMasks(t, c.PID()) {
				if set != mask {
					t.Errorf("ready, the child's thread %d may run on %d CPUs, want the %d of its parent", tid, set.Count(), mask.Count())
				}
			}
		case <-time.After(2 * time.Millisecond):
		}
		b, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.PID()))
		var st unix.Stat_t
		err2 := unix.Stat(fmt.Sprintf("/proc/%d/status", c.PID()), &st)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		uid, gid, groups := "", "", ""
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				uid = strings.Fields(v)[1] // (the effective one)
			}
			if v, ok := strings.CutPrefix(line, "Gid:"); ok {
				gid = strings.Join(strings.Fields(v), " ")
			}
			if v, ok := strings.CutPrefix(line, "Groups:"); ok {
				groups = strings.TrimSpace(v)
			}
		}
		state := fmt.Sprintf("uid %s, gids %s, groups %q, /proc entry of uid %d", uid, gid, groups, st.Uid)
		if seen[state]++; seen[state] == 1 {
			order = append(order, state)
		}
	}
	// (its group and groups from the start: they are changed before its
	// exec)
	id, g, _ := c.IDs()
	gids := strings.Repeat(fmt.Sprint(g)+" ", 3) + fmt.Sprint(g) // (real, effective, saved, filesystem)
	root := fmt.Sprintf("uid 0, gids %s, groups \"\", /proc entry of uid 0", gids)
	user := fmt.Sprintf("uid %d, gids %s, groups \"\", /proc entry of uid 0", id, gids)
	if !slices.Equal(order, []string{root, user}) {
		t.Errorf("the child was %q, want %q then %q (never dumpable as its user)", order, root, user)
	}
}

// processesWithID lists the processes but except that have id as a uid or
// gid (real, effective, saved, file system) or supplementary group.
func processesWithID(t *testing.T, id uint32, except int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "Uid" || k == "Gid" || k == "Groups" {
				if slices.Contains(strings.Fields(v), fmt.Sprint(id)) {
					out = append(out, pid)
					break
				}
			}
		}
	}
	return out
}

// searchableTempDir is a temporary directory anyone may search, as its
// parent (the test's own, 0700 as made).
func searchableTempDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A file anyone may read (0644) is handed over only when the target's
// user may reach it: every directory on its path searchable by that user
// (through its own root too). One in a 0700 directory of a third user's,
// or reached through a symlink into one, is refused; one in a 0700
// directory of the target's user's, or a 0710 one of its group's, or a
// 0755 one, is given.
func TestParentOpenChecksDirectories(t *testing.T) {
	tg := startAsOther(t)
	tgt, _ := TargetOf(tg.PID)
	c := startChild(t, liveConfig(), tgt)
	base := searchableTempDir(t)
	const third = otherUser + 1000
	for _, d := range []struct {
		name     string
		uid, gid int
		mode     os.FileMode
	}{{"third", third, third, 0o700}, {"own", otherUser, third, 0o700}, {"group", 0, otherUser, 0o710}, {"open", 0, 0, 0o755}} {
		p := filepath.Join(base, d.name)
		must(t, os.Mkdir(p, d.mode))
		must(t, os.WriteFile(filepath.Join(p, "pub"), []byte("hi"), 0o644))
		must(t, os.Chown(p, d.uid, d.gid))
		must(t, os.Chmod(p, d.mode))
	}
	must(t, os.Symlink(filepath.Join(base, "third", "pub"), filepath.Join(base, "link")))
	root := procmaps.RootPath(tg.PID)
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"third/pub", false}, {"link", false}, {"own/pub", true}, {"group/pub", true}, {"open/pub", true},
	} {
		for _, r := range []string{"", root} {
			f, err := c.open(&upMsg{Kind: kOpen, Root: r, Path: filepath.Join(base, tc.path), Follow: true})
			if f != nil {
				f.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("open %s (root %q): %v, want ok=%v", tc.path, r, err, tc.ok)
			}
		}
	}
	// The answers are those of the kernel to the target's user: cat
	// run as that user (its own group only, as the target) reads exactly those.
	setpriv := testutil.Need(t, "setpriv")
	for _, tc := range []struct {
		path string
		ok   bool
	}{{"third/pub", false}, {"link", false}, {"own/pub", true}, {"group/pub", true}, {"open/pub", true}} {
		err := exec.Command(setpriv, "--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--groups", fmt.Sprint(otherUser),
			"--", "cat", filepath.Join(base, tc.path)).Run()
		if (err == nil) != tc.ok {
			t.Errorf("cat %s as uid %d: %v, want ok=%v", tc.path, otherUser, err, tc.ok)
		}
	}
}
