//go:build linux

// Package sandbox parses what a hostile target controls where a
// compromise gains nothing.
//
// stackshot runs as root against processes that may be compromised; the
// bytes it parses (ELF, DWARF, CFI, the Go pclntab, perf maps, the stacks
// of a capture) are the target's. The privileged parent keeps what needs
// privilege: ptrace, opening files through the target's view (map_files,
// openat2 inside its root, with symtab.SystemOpener's checks) and reading
// its memory. A child, stackshot re-executed as ChildCommand, unwinds and
// symbolizes: it runs as an unprivileged uid and gid of its own (ids.go),
// not dumpable, with no_new_privs, memory and CPU rlimits and a seccomp
// filter that refuses open, execve, sockets and ptrace. It asks its
// parent, over a unix socket, for each file (the parent opens it, checks
// the child may read it, and hands over the descriptor) and each piece of
// live memory (bounded reads of the one target). A crash, a limit hit or
// a timeout in the child costs that process its names, nothing else.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/diskcache"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// Defaults of Config.
const (
	// DefaultMemoryLimit is the child's address space: Go reserves about
	// 1.5 GiB of it at start; the rest holds the debug-data budget
	// (512 MiB by default) several times over.
	DefaultMemoryLimit = 4 << 30
	DefaultCPUSeconds  = 120
	// grace is how long past the deadline a child may answer before it
	// is killed: its own symbolizer stops at the deadline.
	grace = 2 * time.Second
	// sockBuffer is what either end of the socket may have in flight:
	// a capture's stacks (2.5 MB for 512 threads) pass in a few wake-ups
	// instead of one each 200 KB, the kernel's default.
	sockBuffer = 4 << 20
	// startWait bounds the child's start (exec, lockdown) on an idle
	// machine (startDeadline).
	startWait = 10 * time.Second
)

// Config is what a child is started with.
type Config struct {
	// Symtab configures the child's symbolizer. Context and Opener are
	// ignored (see Deadline); FetchDebug and FetchExecutable run here, in
	// the parent, when the child asks (it has no network).
	Symtab  symtab.Options
	Resolve resolve.Options
	// Deadline bounds the child's work (a --timeout); past it and a
	// grace period the child is killed. Zero: none.
	Deadline    time.Time
	MemoryLimit uint64 // RLIMIT_AS of the child (0: DefaultMemoryLimit)
	GCPercent   int    // the child's GOGC (0: the runtime's default)
	CPUSeconds  uint64 // RLIMIT_CPU of the child (0: DefaultCPUSeconds)
	// Cache is stackshot's cache (its main namespace, nil: none): the
	// child gets a namespace of it of its own (cache.go).
	Cache *diskcache.Cache
}

// Target is the process a child works for: the only one whose files and
// memory it may ask for.
type Target struct {
	PID    int // 0: none (a saved capture)
	MemPID int // where memory is read (see ptrace.Process.MemPID); 0: PID
	UID    int // owner of the target (effective uid), -1 unknown
	GID    int // its group, -1 unknown
}

// TargetOf describes a live process, from /proc/PID/status.
func TargetOf(pid int) (Target, error) {
	st, err := procmaps.ReadStatus(pid)
	if err != nil {
		return Target{}, err
	}
	return Target{PID: pid, UID: st.UIDs[1], GID: st.GIDs[1]}, nil
}

// Needed reports whether a live process's parsing belongs in a child:
// when its owner is not stackshot's own user (root dumping a service's
// process), when it lives in another mount namespace (a container,
// whose files are its own, even when it runs as root), or when the code it
// maps is another user's to write (foreignCode: a root daemon loading a
// library a service account may replace).
// STACKSHOT_SANDBOX=1 asks for it always, =0 never.
func Needed(pid int) bool {
	switch os.Getenv("STACKSHOT_SANDBOX") {
	case "1":
		return true
	case "0":
		return false
	}
	st, err := procmaps.ReadStatus(pid)
	if err != nil {
		return true // unknown owner: assume the worst
	}
	me := os.Geteuid()
	for _, u := range st.UIDs {
		if u != me {
			return true
		}
	}
	if !procmaps.SameMountNamespace(pid) {
		return true
	}
	maps, err := procmaps.ReadMaps(pid)
	return err != nil || foreignCode(pid, maps) != ""
}

// Forced reports whether STACKSHOT_SANDBOX=1 asks for the child whatever
// the owner (tests, and operators who want it for their own processes).
func Forced() bool { return os.Getenv("STACKSHOT_SANDBOX") == "1" }

var (
	exeOnce sync.Once
	exeFile *os.File
	exeErr  error
)

// Prepare opens stackshot's own executable, the child's image, before
// anything else runs: a binary replaced on disk later is not the one
// re-executed.
//
// It also marks every descriptor stackshot inherited close-on-exec: the
// child gets only its socket, never a file the operator's shell left open.
func Prepare() {
	exeOnce.Do(func() {
		exeFile, exeErr = os.OpenFile("/proc/self/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
		if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
			// Before Linux 5.11: one by one.
			if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
				for _, e := range ents {
					if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
						unix.CloseOnExec(fd)
					}
				}
			}
		}
	})
}

// Child is a running sandboxed parser. Its methods are for one goroutine
// at a time.
type Child struct {
	proc    *proc
	sock    int
	cfg     Config
	t       Target
	roots   []string // the target's roots it may open files in
	stderr  *boundedBuffer
	dead    error // set once the child failed: it is not asked again
	expired bool
	budget  bool
	space   *ptrace.Process
	calls   map[string]int // calls served, by kind
	asked   map[string]int // requests made, by kind
	down    *downWriter
	memFor  int             // the MemPID whose memory file the child holds (-1: none could be opened)
	fetched map[string]bool // files the fetchers gave: handed over when the child asks
	// nsCache is the child's cache namespace (nil: none); putBytes what
	// it has had written there.
	nsCache  *diskcache.Cache
	putBytes int64
	// pending are the answers the child still owes, in order: a capture's
	// images and checks (batch.go), or what ResolveThen's request asked
	// for the report pendingFor (then.go).
	pending    []string
	pendingFor *report.Process
	// kept are ResolveThen's answers for the report keptFor, read ahead of
	// another request made before they were asked for (keepOwed).
	kept    map[string]*upMsg
	keptFor *report.Process
	// checked are the stacks the child holds from the kCheckAll requests
	// it was sent since the last kResolve, by thread (batch.go).
	checked map[int]checkedStack
	// imagesOwed is the process whose images the child was asked for, the
	// answer not read yet (batch.go); gave the paths of the files given
	// with its checks (give.go).
	imagesOwed *ptrace.Process
	imagesMaps []procmaps.Mapping // (the maps imagesOwed was sent with)
	gave       map[string]bool
	gaveMods   []givenModule // (their modules)
	// gaveDebug: the modules' debug files and cache entries went with a
	// resolve (give.go); entriesGiven counts the entries.
	gaveDebug    bool
	entriesGiven int
	// spaceHead is space as the child has it (resolvemsg.go).
	spaceHead spaceHead
	// unflushed: requests were made since the child last flushed its
	// cache (cache.go).
	unflushed bool
	// startBy bounds the wait for the setup's answer; startErr is why the
	// child never became ready (Started).
	startBy  time.Time
	startErr error
	user     *childIDs // (nil: stackshot's own)
}

// Start starts a child for target t. An error means no child runs (no
// unprivileged user, no seccomp, ...): the caller's target then loses its
// names (TryStart), it is not parsed in-process.
func Start(cfg Config, t Target) (*Child, error) {
	c, err := spawn(cfg, t)
	if err != nil {
		return nil, err
	}
	c.sendSetup()
	if err := c.Started(); err != nil {
		return nil, err
	}
	return c, nil
}

// spawn starts the child's process, for sendSetup to set up.
func spawn(cfg Config, t Target) (*Child, error) {
	Prepare()
	if exeErr != nil {
		return nil, fmt.Errorf("cannot re-execute stackshot: %v", exeErr)
	}
	if t.MemPID == 0 {
		t.MemPID = t.PID
	}
	if cfg.MemoryLimit == 0 {
		cfg.MemoryLimit = DefaultMemoryLimit
		// A budget raised past the default (--max-debug-bytes) gets room.
		if extra := cfg.Symtab.MaxDebugBytes - 512<<20; extra > 0 {
			cfg.MemoryLimit += 2 * uint64(extra)
		}
	}
	if cfg.CPUSeconds == 0 {
		cfg.CPUSeconds = DefaultCPUSeconds
	}
	var user *childIDs
	if os.Geteuid() == 0 {
		uid, gid, err := childUser(t)
		if err != nil {
			return nil, err
		}
		user = &childIDs{uid, gid}
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	for _, fd := range fds {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, sockBuffer) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, sockBuffer)
		}
	}
	childEnd := os.NewFile(uintptr(fds[1]), "sandbox")
	defer childEnd.Close()
	c := &Child{sock: fds[0], cfg: cfg, t: t, stderr: &boundedBuffer{max: 4096}, down: newDownWriter(), user: user}
	if t.PID != 0 {
		c.roots = []string{procmaps.RootPath(t.PID)}
	}
	if c.proc, err = startProc(childEnd, user, c.stderr); err != nil {
		unix.Close(c.sock)
		return nil, fmt.Errorf("cannot start the sandboxed parser: %v", err)
	}
	return c, nil
}

// sendSetup sends a child spawn started its setup, without waiting for
// its answer: that is owed (Started reads it). Requests may follow at
// once: they wait in the socket, unread, while the child starts and locks
// itself down, as it reads nothing else before (a capture's first checks
// are sent while the child's runtime starts, not after it).
func (c *Child) sendSetup() {
	cfg := c.cfg
	st := &setup{DebugDirs: cfg.Symtab.DebugDirs, NoDemangle: cfg.Symtab.NoDemangle, NamesOnly: cfg.Symtab.NamesOnly,
		MaxDebugBytes: cfg.Symtab.MaxDebugBytes, MaxSectionBytes: cfg.Symtab.MaxSectionBytes, PerfMap: cfg.Symtab.PerfMap,
		Deadline: cfg.Deadline, MaxFrames: cfg.Resolve.MaxFrames, Kernel: cfg.Resolve.Kernel, Live: cfg.Resolve.Live,
		KernelAddrs: cfg.Resolve.KernelAddrs, Sysroot: cfg.Resolve.Sysroot, NoJava: cfg.Resolve.NoJava, Exe: cfg.Resolve.Exe,
		FetchDebug: cfg.Symtab.FetchDebug != nil, FetchExecutable: cfg.Symtab.FetchExecutable != nil, MemoryLimit: cfg.MemoryLimit, CPUSeconds: cfg.CPUSeconds, GCPercent: cfg.GCPercent, Hook: TestHook,
		Cache: cfg.Cache != nil}
	c.startBy = startDeadline(cfg)
	c.pending = append(c.pending, kSetup)
	if err := sendFrame(c.sock, encodeValue(nil, st), -1); err != nil {
		c.fail(err, false)
	}
	if c.t.PID != 0 {
		// (the parent's alone: opened while the child starts)
		c.openNamespace(CacheNamespace(c.t.PID))
	}
}

// Started reads, unless it was read already, the child's answer to its
// setup: nil once it has locked itself down and is ready; an error when it
// never was (no seccomp, its exec failed...), the child closed: the
// caller starts another, once, and else gives the target's names up
// (Launching.Child). Nothing is parsed in-process either way.
func (c *Child) Started() error {
	if len(c.pending) > 0 && c.pending[0] == kSetup {
		c.readStart()
	}
	return c.startErr
}

// readStart reads the answer to the setup, the first owed.
func (c *Child) readStart() {
	c.pending = c.pending[1:]
	var up *upMsg
	err := c.dead
	switch {
	case c.sock < 0:
		if err == nil {
			err = errors.New("closed before it was ready")
		}
	case err == nil:
		up, err = c.receive(c.startBy)
	default:
		// A request failed to go: the child has ended (and was reaped),
		// so what it sent, its answer first, is read without waiting.
		if up, err = recvUp(c.sock, int64(c.cfg.MemoryLimit/2)); err != nil {
			err = c.dead
		}
	}
	if err == nil && up.Kind != kSetup {
		err = fmt.Errorf("unexpected %q", up.Kind)
	}
	if err == nil && up.Err != "" {
		err = errors.New(up.Err)
	}
	if err == nil {
		// (its threads' masks, which it changed for its change of user,
		// are given back: ptrace.Gather)
		ptrace.Settled(c.proc.pid)
	}
	if err != nil {
		c.startErr = fmt.Errorf("the sandboxed parser did not start (%v)", err)
		if c.dead == nil {
			c.dead = c.startErr // (nothing to ask it at Close)
		}
		c.pending, c.pendingFor, c.imagesOwed = nil, nil, nil
		c.Close()
	}
}

// childEnv is the child's whole environment: nothing of the operator's
// but the time zone.
func childEnv() []string {
	// Go keeps cgroup files open to follow CPU limits unless told not
	// to: the child is to hold no descriptor but its socket. It runs with
	// the parent's GOMAXPROCS.
	env := []string{"GODEBUG=containermaxprocs=0,updatemaxprocs=0", "GOMAXPROCS=" + strconv.Itoa(runtime.GOMAXPROCS(0))}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	env = append(env, TestEnv...)
	return env
}

// PID is the child's process id.
func (c *Child) PID() int { return c.proc.pid }

// IDs are the uid and gid the child runs as (childUser), when started by
// root (ok false: it runs as stackshot's user).
func (c *Child) IDs() (uid, gid uint32, ok bool) {
	if c.user == nil {
		return 0, 0, false
	}
	return c.user.uid, c.user.gid, true
}

// Close ends the child, once it has handed over what it has for the
// cache: closing its socket ends it, and it is killed if it lingers.
// Close does not wait for its exit (the kernel's teardown of its address
// space costs a dump milliseconds): the child can no longer reach anything
// of stackshot's, it is reaped in the background, and it is killed with
// stackshot (Pdeathsig) if stackshot exits first. Wait waits for it.
func (c *Child) Close() error {
	c.flushCache()
	c.openNamespace("")
	if c.sock >= 0 {
		unix.Close(c.sock)
		c.sock = -1
	}
	if c.proc == nil {
		return nil
	}
	go c.reap()
	return nil
}

// reap kills the closed child if it lingers past a second.
func (c *Child) reap() {
	select {
	case <-c.proc.done:
	case <-time.After(time.Second):
		c.proc.kill()
		<-c.proc.done
	}
}

// Wait waits until a closed child has exited.
func (c *Child) Wait() {
	if c.proc != nil {
		<-c.proc.done
	}
}

// Expired and BudgetExceeded report what the child's symbolizer reported
// with its last result (see symtab.Symbolizer).
func (c *Child) Expired() bool        { return c.expired }
func (c *Child) BudgetExceeded() bool { return c.budget }

// Resolve unwinds and symbolizes a capture in the child. When the child
// fails (crash, limit, timeout) the process comes back with its threads
// unresolved and the reason as each thread's error, and err says why.
func (c *Child) Resolve(p *ptrace.Process) (*report.Process, error) {
	c.follow(p)
	return c.resolve(p, &downMsg{Kind: kResolve, Proc: p}, -1, nil)
}

// resolve asks m, a kResolve request (with fd: -1 none), of the child;
// after (nil: none) sends what follows the request, before its answer is
// read.
func (c *Child) resolve(p *ptrace.Process, m *downMsg, fd int, after func() error) (*report.Process, error) {
	if c.NeverStarted() {
		return c.Unresolved(p, c.startErr.Error()), c.startErr // (the line said of it)
	}
	c.resolveRequest(m, p)
	var up *upMsg
	var err error
	if !c.gaveDebug {
		err = c.giveDebug(p, c.modulesGiven(p))
	}
	if err == nil {
		up, err = c.roundTripThen(m, fd, c.killAt(), after)
	}
	if err == nil && (up.Kind != kResolve || up.Result == nil) {
		err = fmt.Errorf("no result (%s)", up.Err)
	}
	if err == nil {
		err = joinFrames(up, p)
	}
	if err != nil {
		err = fmt.Errorf("names of process %d lost: the sandboxed parser failed (%v)", p.PID, err)
		return c.Unresolved(p, err.Error()), err
	}
	c.expired = c.expired || up.Expired
	c.budget = c.budget || up.Budget
	return up.Result, nil
}

// Check answers, in the child, whether a thread captured without a stop
// unwinds completely (resolve.Space.CheckNoStop): for ptrace.Capture in
// auto mode. The first thread of a capture has the child read the build
// ids and vdso (Images) and sends the process (without its threads). A
// failed child answers false: the thread is then stopped, as when in
// doubt.
func (c *Child) Check() ptrace.CheckFunc {
	return func(p *ptrace.Process, th *ptrace.Thread) bool {
		if !c.useSpace(p) {
			return false
		}
		up, err := c.roundTrip(&downMsg{Kind: kCheck, Thread: th}, c.killAt())
		return err == nil && up.Kind == kCheck && up.Complete
	}
}

// useSpace makes p the process the child's checks unwind in: the first
// time, it has the child read p's build ids and vdso and sends p without
// its threads. false: the child failed.
func (c *Child) useSpace(p *ptrace.Process) bool {
	c.follow(p)
	if c.space != p {
		c.Images(p)
		head := *p
		head.Threads = nil
		if err := c.send(&downMsg{Kind: kSpace, Proc: &head}); err != nil {
			return false
		}
		c.setSpace(p, p.Maps)
	}
	return true
}

// Images is resolve.CollectImages done in the child: the build id of each
// mapped ELF file, read from the target's memory (ELF headers and notes,
// the target's bytes), and the vdso image. What the child answers is
// checked (hex build ids of mappings that exist, a vdso the size of its
// mapping); when it fails, p gets no build ids (files are then matched by
// device and inode) and err says why.
func (c *Child) Images(p *ptrace.Process) error {
	if p.BuildIDs != nil {
		return nil
	}
	c.follow(p)
	p.BuildIDs = map[uint64]string{}
	head := *p
	head.Threads, head.BuildIDs = nil, nil
	up, err := c.roundTrip(&downMsg{Kind: kImages, Proc: &head}, c.killAt())
	if err == nil && up.Kind != kImages {
		err = fmt.Errorf("unexpected %q", up.Kind)
	}
	if err != nil {
		return err
	}
	useImages(p, p.Maps, up)
	return nil
}

// useImages keeps of the child's kImages answer up what checks out: hex
// build ids of mappings ms (p's maps as the child was sent them) has, a
// vdso the size of its mapping.
func useImages(p *ptrace.Process, ms []procmaps.Mapping, up *upMsg) {
	starts := map[uint64]bool{}
	var vdsoSize uint64
	for _, m := range ms {
		starts[m.Start] = true
		if m.Kind == procmaps.KindVDSO {
			vdsoSize = m.End - m.Start
		}
	}
	for start, id := range up.BuildIDs {
		if starts[start] && len(id) >= 2 && len(id) <= 128 && isHex(id) {
			p.BuildIDs[start] = id
		}
	}
	if len(p.VDSO) == 0 && len(up.VDSO) > 0 && uint64(len(up.VDSO)) == vdsoSize {
		p.VDSO = up.VDSO
	}
}

// Symbolize names addresses of the live process p (its maps and build
// ids read by the parent, without threads), as resolve.Resolver.Symbolize
// does: each address's logical frames, innermost first. When the child
// fails, the addresses come back unnamed and err says why.
func (c *Child) Symbolize(p *ptrace.Process, addrs []uint64) ([][]report.Frame, error) {
	c.follow(p)
	if c.space != p {
		head := *p
		head.Threads = nil
		if err := c.send(&downMsg{Kind: kSpace, Proc: &head}); err != nil {
			return unnamed(addrs), err
		}
		c.setSpace(p, p.Maps)
	}
	var out [][]report.Frame
	for len(addrs) > 0 {
		n := min(len(addrs), maxAddrs)
		up, err := c.roundTrip(&downMsg{Kind: kNames, Addrs: addrs[:n]}, c.killAt())
		if err == nil && (up.Kind != kNames || len(up.Frames) != n) {
			err = fmt.Errorf("%d names for %d addresses", len(up.Frames), n)
		}
		if err != nil {
			return append(out, unnamed(addrs)...), fmt.Errorf("names lost: the sandboxed parser failed (%v)", err)
		}
		c.expired = c.expired || up.Expired
		c.budget = c.budget || up.Budget
		out = append(out, up.Frames...)
		addrs = addrs[n:]
	}
	return out, nil
}

func unnamed(addrs []uint64) [][]report.Frame {
	out := make([][]report.Frame, len(addrs))
	for i, a := range addrs {
		out[i] = []report.Frame{{PC: a, Kind: "user"}}
	}
	return out
}

// Probe runs a test hook in the child (see TestHook) and returns its
// answer.
func (c *Child) Probe(hook string) (string, error) {
	up, err := c.roundTrip(&downMsg{Kind: kHook, Hook: hook}, c.killAt())
	if err != nil {
		return "", err
	}
	return up.Text, nil
}

// follow reads memory where the parent's capture of the target does (a
// live thread when the main thread has exited); a capture of another
// process (a saved one) changes nothing.
func (c *Child) follow(p *ptrace.Process) {
	if c.t.PID != 0 && p.PID == c.t.PID {
		c.t.MemPID = p.MemPID()
	}
	c.handMemory()
}

// handMemory gives a live target's child that thread's memory file,
// /proc/PID/task/TID/mem, opened read-only here: the kernel checks at open
// that stackshot may read the target (as it does for process_vm_readv),
// and the descriptor stays bound to that process's memory (a pid reused
// later is not read through it). The child reads it with pread, without
// a round trip per read; it learns nothing it could not ask for by kMem
// (any address of the one target), and can write nothing. When it cannot
// be opened the child asks for each read (kMem).
func (c *Child) handMemory() {
	if !c.cfg.Resolve.Live || c.t.PID == 0 || c.t.MemPID == c.memFor || c.dead != nil {
		return
	}
	c.memFor = c.t.MemPID
	f, err := os.OpenFile(fmt.Sprintf("%s/%d/task/%d/mem", procmaps.Proc, c.t.PID, c.t.MemPID), os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	fd := -1
	if err == nil {
		defer f.Close()
		fd = int(f.Fd())
	}
	c.sendFD(&downMsg{Kind: kMemFD}, fd)
}

// Without a deadline (report takes no --timeout) one request may take
// twice the child's CPU time limit in wall time: a child that sleeps
// instead of answering does not hang stackshot.
func (c *Child) killAt() time.Time {
	if c.cfg.Deadline.IsZero() {
		return time.Now().Add(2 * time.Duration(c.cfg.CPUSeconds) * time.Second)
	}
	return c.cfg.Deadline.Add(grace)
}

func (c *Child) send(m *downMsg) error { return c.sendFD(m, -1) }

// sendFD sends m with descriptor fd (-1: none).
func (c *Child) sendFD(m *downMsg, fd int) error {
	if c.dead != nil {
		return c.dead
	}
	if c.asked == nil {
		c.asked = map[string]int{}
	}
	c.asked[m.Kind]++
	c.unflushed = c.unflushed || m.Kind != kFlush
	if err := c.down.send(c.sock, m, fd); err != nil {
		c.fail(err, false)
		return c.dead
	}
	return nil
}

// roundTrip sends m and serves the child's calls until it answers. Past
// killAt (zero: never) the child is killed, which ends the wait.
func (c *Child) roundTrip(m *downMsg, killAt time.Time) (*upMsg, error) {
	return c.roundTripFD(m, -1, killAt)
}

// roundTripFD is roundTrip with descriptor fd handed over with m.
func (c *Child) roundTripFD(m *downMsg, fd int, killAt time.Time) (*upMsg, error) {
	return c.roundTripThen(m, fd, killAt, nil)
}

// roundTripThen is roundTripFD calling after (nil: nothing) once m is
// sent, before its answer is read.
func (c *Child) roundTripThen(m *downMsg, fd int, killAt time.Time, after func() error) (*upMsg, error) {
	if err := c.drain(); err != nil {
		return nil, err
	}
	if err := c.sendFD(m, fd); err != nil {
		return nil, err
	}
	if after != nil {
		if err := after(); err != nil {
			return nil, err
		}
	}
	return c.receive(killAt)
}

// receive serves the child's calls until it answers. Past killAt (zero:
// never) the child is killed, which ends the wait.
func (c *Child) receive(killAt time.Time) (*upMsg, error) {
	if c.dead != nil {
		return nil, c.dead
	}
	var timedOut atomic.Bool
	if !killAt.IsZero() {
		var mu sync.Mutex
		t := time.AfterFunc(time.Until(killAt), func() {
			mu.Lock()
			timedOut.Store(true)
			mu.Unlock()
			c.proc.kill()
		})
		defer func() { t.Stop(); mu.Lock(); mu.Unlock() }()
	}
	for {
		up, err := recvUp(c.sock, int64(c.cfg.MemoryLimit/2))
		if err != nil {
			if timedOut.Load() {
				err = errors.New("killed at the deadline (--timeout, or twice its CPU limit without one)")
			}
			c.fail(err, timedOut.Load())
			return nil, c.dead
		}
		switch up.Kind {
		case kOpen, kPerfMap, kMem, kFetch, kCacheGet, kCachePut:
			if err := c.serve(up); err != nil {
				c.fail(err, false)
				return nil, c.dead
			}
		default:
			return up, nil
		}
	}
}

// fail records why the child is no longer asked, and kills it.
func (c *Child) fail(err error, timedOut bool) {
	if c.dead != nil {
		return
	}
	if timedOut {
		c.proc.kill()
		<-c.proc.done
		c.dead = err
		return
	}
	// A child that ended the conversation is usually ending itself: its
	// own status says why, unless it lingers and is killed here.
	killed := false
	select {
	case <-c.proc.done:
	case <-time.After(200 * time.Millisecond):
		c.proc.kill()
		killed = true
		<-c.proc.done
	}
	why := err.Error()
	if how := c.proc.why(c.cfg.CPUSeconds, killed); how != "" {
		why = how
	}
	if line := c.stderr.firstLine(); line != "" {
		why += ": " + line
	}
	c.dead = errors.New(why)
}

// serve answers one call of the child.
func (c *Child) serve(up *upMsg) error {
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[up.Kind]++
	switch up.Kind {
	case kMem:
		if up.Len <= 0 || up.Len > maxMemRead || c.t.MemPID == 0 {
			return c.down.send(c.sock, &downMsg{Kind: kReply, Err: "memory read refused"}, -1)
		}
		buf := make([]byte, up.Len)
		n := ptrace.ReadMemory(c.t.MemPID, buf, up.Addr)
		return c.down.send(c.sock, &downMsg{Kind: kReply, Data: buf[:n]}, -1)
	case kFetch:
		return c.fetch(up)
	case kCacheGet, kCachePut:
		return c.serveCache(up)
	case kOpen, kPerfMap:
		f, i, err := c.openFirst(up)
		if err != nil {
			return c.down.send(c.sock, &downMsg{Kind: kReply, Err: err.Error()}, -1)
		}
		defer f.Close()
		return c.down.send(c.sock, &downMsg{Kind: kReply, Index: i}, int(f.Fd()))
	}
	return fmt.Errorf("unknown call %q", up.Kind)
}

// open opens what the child asks for, with symtab.SystemOpener's checks,
// and hands it over only when the child may read it: the target's own
// mapped files (map_files), kallsyms, the perf map the operator named, and
// otherwise only files the target's user or anyone may read by their
// mode. A compromised child thus learns nothing the target could not
// read itself.
// openFirst is open of up's Root and Path, or of the first of its Cands
// that open allows and finds (and its index), else the last one's error.
func (c *Child) openFirst(up *upMsg) (*os.File, int, error) {
	if up.Kind != kOpen || len(up.Cands) == 0 {
		f, err := c.open(up)
		return f, 0, err
	}
	if len(up.Cands) > maxCands {
		return nil, 0, fmt.Errorf("%d candidates to open (at most %d)", len(up.Cands), maxCands)
	}
	var err error
	for i, cand := range up.Cands {
		var f *os.File
		if f, err = c.open(&upMsg{Kind: kOpen, Root: cand.Root, Path: cand.Path, Follow: true}); err == nil {
			return f, i, nil
		}
	}
	return nil, 0, err
}

func (c *Child) open(up *upMsg) (*os.File, error) {
	var sys symtab.SystemOpener
	if up.Kind == kPerfMap {
		if c.t.PID == 0 || up.PID != c.t.PID || !c.isRoot(up.Root) {
			return nil, errors.New("perf map refused: not the target's")
		}
		f, err := sys.OpenPerfMap(up.PID, up.Root)
		if err != nil {
			return nil, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil || !c.mayRead(&st) {
			f.Close()
			return nil, errors.New("perf map not readable by the target's user")
		}
		return f, nil
	}
	trusted := false
	switch {
	case up.Root != "" && up.Root != "/":
		// The target's root, or the --sysroot the operator gave report.
		if !c.isRoot(up.Root) && (c.t.PID != 0 || up.Root != c.cfg.Resolve.Sysroot) {
			return nil, errors.New("refused: not the target's root")
		}
	case c.t.PID != 0 && isMapFiles(up.Path, c.t.PID):
		trusted = true
	case up.Path == symtab.KallsymsPath:
		trusted = true
	case c.cfg.Symtab.PerfMap != "" && up.Path == c.cfg.Symtab.PerfMap:
		trusted = true
	case c.fetched[up.Path]:
		trusted = true
	}
	f, err := sys.Open(up.Root, up.Path, up.Follow)
	if err != nil {
		return nil, err
	}
	if !trusted {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil || !c.mayRead(&st) || !c.reachable(up.Root, up.Path, up.Follow, &st) {
			f.Close()
			return nil, fmt.Errorf("open %s: not readable by the target's user", up.Path)
		}
	}
	return f, nil
}

// fetch runs the fetcher the child asks for (debuginfod: the child has no
// network) with a build id, and answers with the path of the file it
// gave, which the child may then open. The fetcher verified the file's
// build id; the child parses it as any other.
func (c *Child) fetch(up *upMsg) error {
	get := c.cfg.Symtab.FetchDebug
	if up.Follow {
		get = c.cfg.Symtab.FetchExecutable
	}
	if get == nil || len(up.BuildID) < 2 || len(up.BuildID) > 128 || !isHex(up.BuildID) {
		return c.down.send(c.sock, &downMsg{Kind: kReply, Err: "fetch refused"}, -1)
	}
	ctx := context.Background()
	if !c.cfg.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.cfg.Deadline)
		defer cancel()
	}
	p, err := get(ctx, up.BuildID)
	if err != nil {
		return c.down.send(c.sock, &downMsg{Kind: kReply, Err: err.Error()}, -1)
	}
	if p != "" {
		if c.fetched == nil {
			c.fetched = map[string]bool{}
		}
		c.fetched[p] = true
	}
	return c.down.send(c.sock, &downMsg{Kind: kReply, Path: p}, -1)
}

// mayRead reports whether the target's user (or anyone) may read a file
// by its mode (reachable: and reach it, through directories it may
// search).
func (c *Child) mayRead(st *unix.Stat_t) bool {
	switch {
	case st.Mode&0o004 != 0:
		return true
	case c.t.UID >= 0 && int(st.Uid) == c.t.UID:
		return st.Mode&0o400 != 0
	case c.t.GID >= 0 && int(st.Gid) == c.t.GID:
		return st.Mode&0o040 != 0
	}
	return false
}

// isRoot reports whether root is the target's root: /proc/PID/root or
// /proc/PID/task/TID/root.
func (c *Child) isRoot(root string) bool {
	if c.t.PID == 0 {
		return false
	}
	for _, r := range c.roots {
		if root == r {
			return true
		}
	}
	prefix := procmaps.Proc + "/" + strconv.Itoa(c.t.PID) + "/task/"
	rest, ok := strings.CutPrefix(root, prefix)
	if !ok {
		return false
	}
	tid, ok := strings.CutSuffix(rest, "/root")
	return ok && isDigits(tid)
}

func isMapFiles(p string, pid int) bool {
	rest, ok := strings.CutPrefix(p, procmaps.Proc+"/"+strconv.Itoa(pid)+"/map_files/")
	if !ok {
		return false
	}
	a, b, ok := strings.Cut(rest, "-")
	return ok && isHex(a) && isHex(b)
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return s != ""
}

// Unresolved is a capture shown without the parsing the child was to do
// (see resolve.Unnamed).
func (c *Child) Unresolved(p *ptrace.Process, why string) *report.Process {
	return resolve.Unnamed(p, c.cfg.Resolve.Kernel, why)
}

// boundedBuffer keeps the first max bytes written to it (the child's
// stderr: a panic's first line, for the error).
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) firstLine() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	line, _, _ := strings.Cut(b.buf.String(), "\n")
	return strings.TrimSpace(line)
}
