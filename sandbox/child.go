//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/contain"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// ChildCommand is the hidden subcommand that runs the child: stackshot
// re-executes itself with it, the socket as descriptor 3.
const ChildCommand = "__resolve"

// childSock is the child's end of the socket.
const childSock = 3

// Main runs the sandboxed child and returns its exit code. Run by hand
// (without the parent's socket as descriptor 3) it refuses.
func Main() int {
	if d, err := unix.GetsockoptInt(childSock, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || d != unix.AF_UNIX {
		fmt.Fprintf(os.Stderr, "stackshot: %s is not a command (it is stackshot's own sandboxed parser, started by stackshot itself; run 'stackshot help')\n", ChildCommand)
		return 2
	}
	if err := becomeUser(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "stackshot: the sandboxed parser cannot become its user: %v\n", err)
		return 1
	}
	b, fd, err := recvFrame(childSock, maxSetup)
	if fd >= 0 {
		unix.Close(fd)
	}
	cfg := &setup{}
	if err != nil || decodeInto(b, cfg, 0) != nil {
		return 1
	}
	if err := lockdown(cfg); err != nil {
		sendUp(childSock, &upMsg{Kind: kSetup, Err: err.Error()})
		return 1
	}
	if err := sendUp(childSock, &upMsg{Kind: kSetup}); err != nil {
		return 1
	}
	c := &client{sock: childSock, down: newDownReader()}
	so := symtab.Options{DebugDirs: cfg.DebugDirs, NoDemangle: cfg.NoDemangle, NamesOnly: cfg.NamesOnly,
		MaxDebugBytes: cfg.MaxDebugBytes, MaxSectionBytes: cfg.MaxSectionBytes, PerfMap: cfg.PerfMap,
		Opener: c}
	if cfg.FetchDebug {
		so.FetchDebug = c.fetchDebug
	}
	if cfg.FetchExecutable {
		so.FetchExecutable = c.fetchExecutable
	}
	if cfg.Cache {
		childCache = &cacheClient{c: c}
		so.Cache = childCache
	}
	if !cfg.Deadline.IsZero() {
		ctx, cancel := context.WithDeadline(context.Background(), cfg.Deadline)
		defer cancel()
		so.Context = ctx
	}
	sym := symtab.New(so)
	res := resolve.NewResolver(sym, resolve.Options{MaxFrames: cfg.MaxFrames, Kernel: cfg.Kernel,
		Live: cfg.Live, KernelAddrs: cfg.KernelAddrs, NoJava: cfg.NoJava})
	var memc *memClient
	if cfg.Live {
		memc = &memClient{c: c, fd: -1}
	}
	return serve(cfg, c, sym, res, memc)
}

// names answers kNames: each address's frames in space (unnamed when
// naming it panicked).
func names(space *resolve.Space, addrs []uint64, sym *symtab.Symbolizer, res *resolve.Resolver) upMsg {
	up := upMsg{Kind: kNames}
	for _, a := range addrs {
		var fr []report.Frame
		if err := contain.Call("naming an address", func() { fr = res.Symbolize(space, a, true) }); err != nil {
			fr = []report.Frame{{PC: a, Kind: "user"}}
		}
		up.Frames = append(up.Frames, fr)
	}
	up.Expired, up.Budget = sym.Expired(), sym.BudgetExceeded()
	return up
}

// takesFD says which requests come with a descriptor the child keeps.
func takesFD(kind string) bool {
	return kind == kMemFD || kind == kGo || kind == kRuntime || kind == kRuntimeLocks || kind == kRecordRuntime || kind == kSaved || kind == kResolve || kind == kGive || kind == kGiveCache
}

// serve answers the parent's requests until it is done: resolve a
// capture, name addresses, check a no-stop capture, read build ids.
func serve(cfg *setup, cl *client, sym *symtab.Symbolizer, res *resolve.Resolver, memc *memClient) int {
	var mem io.ReaderAt
	if memc != nil {
		mem = memc
	}
	var k checks
	var rec walking
	var then []report.Thread // a resolve's threads, for what its request asks next
	warm := false            // the checks' modules are to be readied when no request waits (kGiven)
	for {
		if warm && cl.idle() {
			res.WarmChecked(k.space)
			warm = false
		}
		m, fd, err := cl.next()
		if err != nil {
			return 0 // the parent is done (or gone)
		}
		warm = m.Kind == kGiven || warm && (m.Kind == kGive || m.Kind == kGiveCache || m.Kind == kCheckAll)
		if fd >= 0 && !takesFD(m.Kind) {
			unix.Close(fd)
			fd = -1
		}
		if memc != nil && (m.Kind == kResolve || m.Kind == kSpace || m.Kind == kImages || m.Kind == kGo || m.Kind == kRuntime || m.Kind == kRuntimeLocks || m.Kind == kLocks || m.Kind == kRecord) {
			memc.reset()
		}
		var up upMsg
		switch m.Kind {
		case kMemFD, kGo, kRuntime, kRuntimeLocks, kLocks, kSaved:
			var ok bool
			if up, ok = serveWork(cfg, m, fd, sym, res, memc); !ok {
				return 1
			}
			if m.Kind == kMemFD {
				continue // (no answer)
			}
		case kResolve:
			if !k.forResolve(m) {
				return 1
			}
			up, then = resolveProcess(cfg, m, fd, sym, res, mem)
		case kSpace:
			if m.Proc == nil {
				return 1
			}
			k.setSpace(res.Space(m.Proc, mem), m.Proc)
			continue
		case kImages:
			if m.Proc == nil || mem == nil {
				return 1
			}
			up = k.images(m, res, mem, memc)
		case kCheck:
			up.Kind = kCheck
			if k.space != nil && m.Thread != nil {
				up.Complete = k.space.CheckNoStop(m.Thread)
			}
		case kCheckAll:
			hookBefore(cfg.Hook, kCheckAll)
			up = k.checkAll(m.Check)
		case kGive, kGiveCache, kGiven:
			cl.keepGift(m, fd)
			continue // (no answer)
		case kNames:
			hookBefore(cfg.Hook, kNames)
			if k.space == nil || len(m.Addrs) > maxAddrs {
				return 1
			}
			up = names(k.space, m.Addrs, sym, res)
		case kRecord, kRecordRuntime:
			var ok bool
			if up, ok = rec.serve(cfg, sym, mem, memc, m, fd); !ok {
				return 1
			}
		case kHook:
			up.Kind, up.Text = kHook, runHook(m.Hook)
		case kFlush:
			flush(sym)
			up.Kind = kFlush
		default:
			return 1
		}
		if err := sendUp(childSock, &up); err != nil {
			return 1
		}
		if m.Kind == kResolve && (m.LocksToo || fd >= 0 || m.FlushToo) {
			if !resolveThen(cfg, cl, m, then, fd, sym, res, memc) {
				return 1
			}
			then = nil
		}
	}
}

// resolveProcess answers a kResolve request: m.Proc resolved, its frames
// shared (shareFrames); then, its threads as resolved, for what the
// request asks next (resolveThen), when it asks for anything.
func resolveProcess(cfg *setup, m *downMsg, fd int, sym *symtab.Symbolizer, res *resolve.Resolver, mem io.ReaderAt) (up upMsg, then []report.Thread) {
	hookBefore(cfg.Hook, kResolve)
	up.Kind = kResolve
	if err := contain.Call("resolving a process", func() { up.Result = res.Process(m.Proc, mem) }); err != nil {
		up.Err = err.Error()
	}
	if up.Result != nil && (m.LocksToo || fd >= 0) {
		then = append([]report.Thread(nil), up.Result.Threads...) // (before shareFrames takes their frames)
	}
	shareFrames(&up)
	up.Expired, up.Budget = sym.Expired(), sym.BudgetExceeded()
	return up, then
}

// images answers a kImages request: p's build ids and vdso, read from
// memory.
func images(p *ptrace.Process, mem io.ReaderAt) (up upMsg) {
	up.Kind = kImages
	if err := contain.Call("reading build ids", func() { resolve.CollectImages(p, mem) }); err != nil {
		up.Err = err.Error()
	}
	up.BuildIDs, up.VDSO = p.BuildIDs, p.VDSO
	return up
}

// haveReport decodes m.Report into m.report unless the child made it
// (resolveThen); false: there is none.
func haveReport(m *downMsg) bool {
	if m.report == nil && m.Report != nil {
		m.report, _ = decodeReport(m.Report)
	}
	return m.report != nil
}

// flush hands what is queued for the cache to the parent (kFlush).
func flush(sym *symtab.Symbolizer) {
	sym.Flush()
	if childCache != nil {
		childCache.flush()
	}
}

// serveWork answers the requests of serve that hand over a descriptor fd
// or read goroutines and locks: (up, false) for a malformed request.
func serveWork(cfg *setup, m *downMsg, fd int, sym *symtab.Symbolizer, res *resolve.Resolver, memc *memClient) (up upMsg, ok bool) {
	switch m.Kind {
	case kMemFD:
		if memc == nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			return up, false
		}
		memc.setFD(fd)
	case kGo:
		if m.Proc == nil || !haveReport(m) || fd < 0 {
			return up, false
		}
		hookBefore(cfg.Hook, kGo)
		up.Kind, up.Result = kGo, goroutines(cfg, res, m, memc, os.NewFile(uintptr(fd), "exe"))
		up.Stacks, up.StackOf = shareStacks(up.Result.Goroutines)
	case kRuntime, kRuntimeLocks:
		if m.Proc == nil || m.Mapping == nil || !haveReport(m) || fd < 0 {
			if fd >= 0 {
				unix.Close(fd)
			}
			return up, false
		}
		hookBefore(cfg.Hook, m.Kind)
		if m.Kind == kRuntimeLocks {
			return runtimeLocks(m, memc, os.NewFile(uintptr(fd), "runtime")), true
		}
		up.Kind = kRuntime
		up.Result, up.NotRuntime, up.RuntimeRead = runtimeFrames(m, memc, os.NewFile(uintptr(fd), "runtime"))
	case kLocks:
		if !haveReport(m) {
			return up, false
		}
		hookBefore(cfg.Hook, kLocks)
		up.Kind = kLocks
		var waits []*report.WaitingFor
		waits, up.Deadlocks = locks(m, res, memc)
		up.WaitTab, up.WaitOf = shareWaits(waits)
	case kSaved:
		if fd < 0 {
			return up, false
		}
		hookBefore(cfg.Hook, kSaved)
		up = saved(cfg, sym, m, os.NewFile(uintptr(fd), "capture"))
		up.Expired, up.Budget = sym.Expired(), sym.BudgetExceeded()
	}
	return up, true
}

// lockdown takes from the child what a parser never needs, before it reads
// anything the target wrote: it cannot be ptraced (not dumpable) nor gain
// privileges (no_new_privs), is bounded in memory and CPU time, and cannot
// open files, execute programs, use sockets or touch other processes'
// memory (seccomp, every thread).
func lockdown(cfg *setup) error {
	if cfg.Hook == "lockdown" {
		return errors.New("test hook: the lockdown fails")
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if cfg.MemoryLimit > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: cfg.MemoryLimit, Max: cfg.MemoryLimit}); err != nil {
			return fmt.Errorf("setrlimit(RLIMIT_AS): %w", err)
		}
		// The collector works harder well before the address space ends.
		debug.SetMemoryLimit(int64(cfg.MemoryLimit / 2))
	}
	if cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if cfg.CPUSeconds > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: cfg.CPUSeconds, Max: cfg.CPUSeconds}); err != nil {
			return fmt.Errorf("setrlimit(RLIMIT_CPU): %w", err)
		}
	}
	// The local time zone is read lazily from /etc/localtime: now, while
	// files can still be opened.
	time.Now().Zone()
	return loadFilter()
}

// client is the child's side of the calls it makes to its parent: one at
// a time (the socket carries one conversation).
type client struct {
	mu    sync.Mutex
	sock  int
	down  *downReader      // shared with the main loop, which waits meanwhile
	given map[string]given // files the parent gave before they were asked for, by path (give.go)
	// early are the requests that came while a call waited for its reply,
	// in order: a capture sends its checks without waiting for answers
	// (batch.go), and reads them, and serves calls, only after.
	early []earlyRequest
}

type earlyRequest struct {
	m  *downMsg
	fd int
}

// maxEarly bounds the requests kept while a call waits: more than a
// capture's unanswered checks (ptrace's maxBatchesAsked) and the files
// given with them.
const maxEarly = 64

// next is the parent's next request: an early one, else the next frame.
func (c *client) next() (*downMsg, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.early) > 0 {
		r := c.early[0]
		c.early = c.early[1:]
		return r.m, r.fd, nil
	}
	return c.down.recv(c.sock)
}

func (c *client) call(m *upMsg) (*downMsg, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := sendUp(c.sock, m); err != nil {
		return nil, -1, err
	}
	var r *downMsg
	var fd int
	for {
		var err error
		if r, fd, err = c.down.recv(c.sock); err != nil {
			return nil, -1, err
		}
		if r.Kind == kReply {
			break
		}
		if len(c.early) >= maxEarly {
			if fd >= 0 {
				unix.Close(fd)
			}
			return nil, -1, fmt.Errorf("unexpected %q from the parent", r.Kind)
		}
		c.early = append(c.early, earlyRequest{r, fd})
	}
	if r.Err != "" {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, -1, errors.New(r.Err)
	}
	return r, fd, nil
}

func (c *client) openFile(m *upMsg, name string) (*os.File, error) {
	_, fd, err := c.call(m)
	if err != nil {
		return nil, err
	}
	if fd < 0 {
		return nil, fmt.Errorf("open %s: no descriptor from the parent", name)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Open implements symtab.Opener: the parent opens the file, with its
// checks, and hands over the descriptor.
func (c *client) Open(root, p string, follow bool) (*os.File, error) {
	if root == "" && follow {
		if f, err, ok := c.takeGiven(p); ok {
			return f, err
		}
	}
	return c.openFile(&upMsg{Kind: kOpen, Root: root, Path: p, Follow: follow}, p)
}

// OpenFirst implements symtab.FirstOpener: the parent opens the first of
// cands it can, with its checks, in one round trip.
func (c *client) OpenFirst(cands []symtab.Candidate) (int, *os.File, error) {
	var err error
	skip := 0
	if len(cands) > 0 && cands[0].Root == "" {
		// The parent may have given the first (giveDebug), or said why
		// it cannot be opened.
		var f *os.File
		var ok bool
		if f, err, ok = c.takeGiven(cands[0].Path); ok && f != nil {
			return 0, f, nil
		} else if ok {
			skip = 1
		}
	}
	for from := skip; from < len(cands); from += maxCands {
		some := cands[from:min(len(cands), from+maxCands)]
		var r *downMsg
		var fd int
		if r, fd, err = c.call(&upMsg{Kind: kOpen, Cands: some}); err != nil {
			continue
		}
		if fd < 0 || r.Index < 0 || r.Index >= len(some) {
			if fd >= 0 {
				unix.Close(fd)
			}
			return -1, nil, errors.New("open: no candidate from the parent")
		}
		return from + r.Index, os.NewFile(uintptr(fd), some[r.Index].Path), nil
	}
	return -1, nil, err
}

// OpenPerfMap implements symtab.Opener.
func (c *client) OpenPerfMap(pid int, root string) (*os.File, error) {
	return c.openFile(&upMsg{Kind: kPerfMap, PID: pid, Root: root}, fmt.Sprintf("/tmp/perf-%d.map", pid))
}

// fetchDebug and fetchExecutable implement symtab.Options' fetchers:
// the parent fetches (the child has no network) and answers with the
// file's path, which it then hands over when asked (Open).
func (c *client) fetchDebug(_ context.Context, buildID string) (string, error) {
	return c.fetch(buildID, false)
}

func (c *client) fetchExecutable(_ context.Context, buildID string) (string, error) {
	return c.fetch(buildID, true)
}

func (c *client) fetch(buildID string, exe bool) (string, error) {
	r, fd, err := c.call(&upMsg{Kind: kFetch, BuildID: buildID, Follow: exe})
	if fd >= 0 {
		unix.Close(fd)
	}
	if err != nil {
		if err.Error() == symtab.ErrFetchDeferred.Error() {
			return "", symtab.ErrFetchDeferred
		}
		return "", err
	}
	return r.Path, nil
}

// memClient reads the live target's memory through the parent, in
// requests of at most maxMemRead bytes. Small reads (the unwinder's: code
// bytes, stack words) go by whole pages, kept until the next request from
// the parent (reset): every thread of a capture runs the same code, so most
// reads are then answered without a round trip.
type memClient struct {
	c     *client
	mu    sync.Mutex
	pages map[uint64][]byte // page address -> its bytes (short: the readable part)
	// fd is the target's /proc/PID/task/TID/mem, opened read-only by the
	// parent (which the kernel checked then), read with pread; -1: none,
	// each read is asked of the parent.
	fd int
}

// setFD replaces the memory descriptor (the thread memory is read
// through changed, or none could be opened: fd < 0).
func (m *memClient) setFD(fd int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fd >= 0 {
		unix.Close(m.fd)
	}
	m.fd = fd
	m.pages = nil
}

// direct reads without the page cache: the goroutine reader and the lock
// reader read twice to see that what they read did not change meanwhile.
func (m *memClient) direct() directMem { return directMem{m} }

type directMem struct{ m *memClient }

// ReadAt implements io.ReaderAt (an error for a short read).
func (d directMem) ReadAt(p []byte, off int64) (int, error) { return d.m.readDirect(p, uint64(off)) }

// ReadRanges implements goruntime.RangeReader: one pread per range.
func (d directMem) ReadRanges(bufs [][]byte, addrs []uint64) []bool {
	ok := make([]bool, len(bufs))
	for i := range bufs {
		n, err := d.m.readDirect(bufs[i], addrs[i])
		ok[i] = err == nil && n == len(bufs[i])
	}
	return ok
}

const (
	pageSize     = 4096
	maxCachePage = 4096 // 16 MiB of cached memory at most
)

// reset forgets the cached pages: the target has run since.
func (m *memClient) reset() {
	m.mu.Lock()
	m.pages = nil
	m.mu.Unlock()
}

// ReadAt implements io.ReaderAt as ptrace.MemReader does: an error for a
// short read.
func (m *memClient) ReadAt(p []byte, off int64) (int, error) {
	if len(p) <= pageSize {
		return m.readCached(p, uint64(off))
	}
	return m.readDirect(p, uint64(off))
}

func (m *memClient) readCached(p []byte, addr uint64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for n < len(p) {
		a := addr + uint64(n)
		base := a &^ (pageSize - 1)
		pg, ok := m.pages[base]
		if !ok {
			if len(m.pages) >= maxCachePage {
				m.pages = nil
			}
			buf := make([]byte, pageSize)
			got, _ := m.readDirect(buf, base)
			pg = buf[:got]
			if m.pages == nil {
				m.pages = map[uint64][]byte{}
			}
			m.pages[base] = pg
		}
		in := int(a - base)
		if in >= len(pg) {
			return n, fmt.Errorf("reading %#x: short read (%d of %d)", addr, n, len(p))
		}
		c := copy(p[n:], pg[in:])
		n += c
		if in+c < pageSize && n < len(p) {
			return n, fmt.Errorf("reading %#x: short read (%d of %d)", addr, n, len(p))
		}
	}
	return n, nil
}

func (m *memClient) readDirect(p []byte, addr uint64) (int, error) {
	if m.fd >= 0 { // (set only between requests)
		return preadAll(m.fd, p, addr)
	}
	n := 0
	for n < len(p) {
		want := min(len(p)-n, maxMemRead)
		r, fd, err := m.c.call(&upMsg{Kind: kMem, Addr: addr + uint64(n), Len: want})
		if fd >= 0 {
			unix.Close(fd)
		}
		if err != nil {
			return n, err
		}
		got := copy(p[n:n+want], r.Data)
		n += got
		if got < want {
			return n, fmt.Errorf("reading %#x: short read (%d of %d)", addr, n, len(p))
		}
	}
	return n, nil
}

// preadAll reads len(p) bytes at addr of the target's memory file; an
// error for a short read (an unmapped page: EIO).
func preadAll(fd int, p []byte, addr uint64) (int, error) {
	n := 0
	for n < len(p) {
		r, err := unix.Pread(fd, p[n:], int64(addr+uint64(n)))
		if err == unix.EINTR {
			continue
		}
		if err != nil || r <= 0 {
			return n, fmt.Errorf("reading %#x: short read (%d of %d)", addr, n, len(p))
		}
		n += r
	}
	return n, nil
}
