//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/internal/diskcache"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
	"stackshot/symtab"
)

// The parent and the child talk over one unix stream socket, in frames of
// a 4-byte little-endian length and a payload, in the codec of codec.go:
// down (parent to child), the child's setup first (sendSetup), then
// downMsg; up (child to parent), upMsg, bounded before they are read and
// decoded within their bounds: the parent trusts nothing the child says. A
// descriptor travels with the frame that answers an open (SCM_RIGHTS), and
// with a file the parent gives unasked (kGive).

// Bounds on frames.
const (
	maxSetup    = 64 << 10  // the child's setup
	maxUpCall   = 64 << 10  // a child's request (open, read memory)
	maxUpResult = 256 << 20 // a resolved process
	maxDown     = 2 << 30   // a capture (stacks up to 4 MiB per thread)
	maxMemRead  = 1 << 20   // one memory read the child asks for
	maxAddrs    = 1 << 12   // addresses named in one request
	maxCands    = 64        // candidates of one open
)

// Kinds of frames.
const (
	kSetup   = "setup"   // down: the child's configuration; up: lockdown done
	kResolve = "resolve" // down: resolve Proc; up: its result
	kSpace   = "space"   // down: the process whose threads come to check
	kImages  = "images"  // down: read Proc's build ids and vdso; up: them
	kCheck   = "check"   // down: does Thread unwind completely? up: the answer
	kHook    = "hook"    // down: a test hook; up: its answer
	kNames   = "names"   // down: name Addrs in the space; up: their Frames
	kMemFD   = "memfd"   // down: the target's /proc/PID/task/TID/mem, read-only (none: ask by kMem)
	kGo      = "go"      // down: read Proc's goroutines (its executable attached); up: them in Result
	kLocks   = "locks"   // down: find the owners of the locks Report's threads wait for; up: Waits, Deadlocks
	kRuntime = "runtime" // down: read Runtime's frames into Report's threads (Mapping's file attached); up: them in Result
	kTasks   = "tasks"   // down: the Tasks of the kResolve just sent (LocksToo); no answer
	kSaved   = "saved"   // down: resolve the capture file or core attached; up: its processes in Procs
	kReply   = "reply"   // down: the answer to a call
	kOpen    = "open"    // up: open Root/Path
	kPerfMap = "perfmap" // up: open PID's perf map in Root
	kMem     = "mem"     // up: read Len bytes at Addr
	kFetch   = "fetch"   // up: fetch BuildID's debug file (Follow: its executable); down: its Path
)

// kRuntimeLocks: down: name the owners of the Runtime's locks Report's
// threads wait for (Mapping's file attached; Tasks); up: the waits in
// WaitTab, WaitOf (runtimelocks.go).
const kRuntimeLocks = "runtimelocks"

// The child's cache (cache.go): entries of its namespace, by key, opened
// and written by the parent.
const (
	kCacheGet = "cacheget" // up: open Key's entry (at most Len payload bytes); down: its descriptor
	kCachePut = "cacheput" // up: write Data under Key
	kFlush    = "flush"    // down: hand over what is queued for the cache; up: done
)

// record's kind of frame (record.go).
const (
	kRecord = "record" // down: unwind Threads (of Proc, when its maps are new); up: Walks, and NamedPCs' names in Frames
	// down: open Runtime's interpreter in Mapping's file (attached) and
	// keep it for Target's kRecord; up: its version in Text
	kRecordRuntime = "recordruntime"
)

// setup configures the child's symbolizer and resolver.
type setup struct {
	DebugDirs       []string
	NoDemangle      bool
	NamesOnly       bool
	MaxDebugBytes   int64
	MaxSectionBytes int64
	PerfMap         string
	Deadline        time.Time // zero: none
	MaxFrames       int
	Kernel          bool
	Sysroot         string // report's --sysroot: where a core's files are opened
	Exe             string // report's -e: the core's main executable
	Live            bool
	KernelAddrs     bool
	NoJava          bool   // resolve.Options.NoJava
	FetchDebug      bool   // the parent fetches debug files by build id (kFetch)
	FetchExecutable bool   // and module files
	MemoryLimit     uint64 // RLIMIT_AS
	CPUSeconds      uint64 // RLIMIT_CPU
	GCPercent       int    // GOGC (0: the runtime's default)
	Hook            string // a test hook (see TestHook)
	Cache           bool   // the parent keeps a cache namespace for the child (cache.go)
}

type downMsg struct {
	Kind   string
	Proc   *ptrace.Process
	Thread *ptrace.Thread
	Hook   string
	Addrs  []uint64
	Err    string
	Data   []byte
	Path   string // kFetch's answer
	Index  int    // kOpen's answer to Cands: the one opened
	// Report is the resolved process kGo and kLocks work on (its threads:
	// their frames and syscalls), encoded (encodeReport); report is it
	// decoded, or the child's own (then.go).
	Report []byte
	report *report.Process
	// Runtime is the runtime whose frames kRuntime reads ("python"), in
	// the file of Mapping, which comes with the request.
	Runtime string
	Mapping *procmaps.Mapping
	// Tasks are the target's threads now (kLocks, kRuntimeLocks: an owner
	// is one of them).
	Tasks []int
	// LocksToo: kResolve's request goes on with kLocks for the threads
	// resolved (with the Tasks of the kTasks frame that follows the
	// request), and kGo when it comes with the executable (then.go).
	LocksToo bool
	// FlushToo: and then kFlush.
	FlushToo bool
	// SpaceToo: kImages's Proc, with what the child read, is then the
	// space of kCheck and kCheckAll, as kSpace's would be (batch.go).
	SpaceToo bool
	// TIDs keeps only these threads of a saved capture (--tid); Size is
	// its file's size.
	TIDs []int
	Size int64

	// kRecord: the threads of one tick, each with what the unwinder
	// reads only (registers, stack copy, system call).
	Threads []ptrace.Thread
	// Target is the process kRecordRuntime opens an interpreter for, and
	// whose interpreter kRecord asks (Runtime set) the threads' frames of
	// (recordruntime.go).
	Target procmaps.Identity

	// Check are the threads kCheckAll asks about (batch.go).
	Check []*ptrace.Thread
	// Kept: kResolve's Proc.Threads at these indexes come without their
	// stack, which is the one a kCheckAll since the last kResolve sent
	// for the same thread (batch.go).
	Kept []int
	// SameSpace: kResolve's Proc comes without the maps, build ids, vdso
	// and auxv of the process the checks unwind in, which are still its
	// own; KStacks are its threads' distinct kernel stacks, and KStackOf
	// each thread's index in them (-1: none), their own left out
	// (resolvemsg.go).
	SameSpace bool
	KStacks   [][]procmaps.KernelFrame
	KStackOf  []int

	// Key is the entry kGiveCache hands over (give.go).
	Key *diskcache.Key
}

type upMsg struct {
	Kind     string
	Root     string
	Path     string
	Follow   bool
	PID      int
	Addr     uint64
	Len      int
	BuildID  string
	Result   *report.Process
	Expired  bool
	Budget   bool
	Complete bool
	Err      string
	Text     string
	Frames   [][]report.Frame
	BuildIDs map[uint64]string
	VDSO     []byte
	// kGo: the goroutines' distinct stacks, and each goroutine's index in
	// them (-1: none), its Frames left out (most share a few stacks).
	Stacks  [][]report.Frame
	StackOf []int
	// kLocks: each thread's WaitingFor (in the order of the request's
	// threads: WaitOf, indexes in WaitTab) and the cycles among them.
	WaitTab   []*report.WaitingFor // (table.go: most wait alike)
	WaitOf    []int
	Deadlocks []report.Deadlock
	// kRuntime: the file handed over holds no such runtime; or it does,
	// and its frames were read (RuntimeRead), not only its version.
	NotRuntime  bool
	RuntimeRead bool
	// kSaved: the capture's processes, the thread ids --tid asked for
	// that each lacks, why one could not be shown, and whether the file is
	// not a capture at all.
	Procs      []*report.Process
	Missing    [][]int
	Errs       []string
	PIDs       []int
	NotCapture bool

	// Cands: kOpen opens the first of these it can (following symlinks,
	// each as Root and Path would be), instead of Root and Path.
	Cands []symtab.Candidate

	// kCacheGet, kCachePut (cache.go): the entry's key, and what to write.
	Key  *diskcache.Key
	Data []byte

	// kRecord: each thread's walk, packed: its frame count (noRegs: no
	// registers) and stop reason, then per frame its PC, SP and flags
	// (method, packExact, packSignal); and the addresses named for the
	// first time since the maps changed (nameKey), their names in Frames.
	Walks    []uint64
	NamedPCs []uint64
	// kRecord with Runtime: each walked thread's count of runtime frames
	// (in RtFrames, one thread after the other) and whether it holds the
	// GIL; none at all when they were not read (recordruntime.go).
	RtCounts []uint64
	RtFrames []pyruntime.Frame
	RtGIL    []bool

	// kCheckAll (batch.go): whether each thread asked about unwinds
	// completely, in the order asked.
	Completes []bool

	// kResolve (frames.go): Result without its threads; what unwinding
	// found for each, the threads' distinct frames, and each thread's
	// frames as indexes in them with their stack pointers, packed.
	Unwound   []unwound
	FrameTab  []report.Frame
	FrameRefs []byte
}

// encodeReport encodes p for downMsg.Report: the report travels down only
// when lock owners or goroutines are asked for on their own (a dump has the
// child do both after resolving: then.go).
func encodeReport(p *report.Process) []byte { return encodeValue(nil, p) }

func decodeReport(b []byte) (*report.Process, error) {
	var p report.Process
	if err := decodeInto(b, &p, 0); err != nil {
		return nil, err
	}
	return &p, nil
}

// sendFrame writes one frame, with fd (when >= 0) attached.
func sendFrame(sock int, payload []byte, fd int) error {
	return sendFrameParts(sock, [][]byte{payload}, fd)
}

// maxIovecs bounds the buffers of one sendmsg (the kernel's IOV_MAX).
const maxIovecs = 1024

// sendFrameParts writes one frame whose payload is parts one after the
// other, each sent from where it lies (sendmsg's iovecs), with fd (when
// >= 0) attached to its first bytes.
func sendFrameParts(sock int, parts [][]byte, fd int) error {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(size))
	bufs := append([][]byte{hdr[:]}, parts...)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	for {
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
		if len(bufs) == 0 {
			return nil
		}
		n, err := unix.SendmsgBuffers(sock, bufs[:min(len(bufs), maxIovecs)], oob, nil, unix.MSG_NOSIGNAL)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		oob = nil
		for n > 0 {
			k := min(n, len(bufs[0]))
			bufs[0], n = bufs[0][k:], n-k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
}

// recvFrame reads one frame of at most max bytes and the descriptor sent
// with it (-1: none). A frame carrying more than one descriptor, or longer
// than max, is an error (and its descriptors are closed).
func recvFrame(sock int, max int) ([]byte, int, error) {
	var hdr [4]byte
	fd := -1
	fail := func(err error) ([]byte, int, error) {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, -1, err
	}
	got := 0
	oob := make([]byte, unix.CmsgSpace(4*4))
	for got < len(hdr) {
		n, oobn, flags, _, err := unix.Recvmsg(sock, hdr[got:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail(err)
		}
		if oobn > 0 {
			fds, err := parseRights(oob[:oobn])
			for _, f := range fds {
				if fd < 0 && err == nil && len(fds) == 1 {
					fd = f
				} else {
					unix.Close(f)
				}
			}
			if err == nil && len(fds) != 1 {
				err = errors.New("several descriptors in one frame")
			}
			if err != nil {
				return fail(err)
			}
		}
		if flags&unix.MSG_CTRUNC != 0 {
			return fail(errors.New("control data truncated"))
		}
		if n == 0 {
			return fail(errors.New("connection closed"))
		}
		got += n
	}
	size := int(binary.LittleEndian.Uint32(hdr[:]))
	if size > max {
		return fail(fmt.Errorf("frame of %d bytes (at most %d)", size, max))
	}
	buf := make([]byte, size)
	for off := 0; off < size; {
		n, err := unix.Read(sock, buf[off:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail(err)
		}
		if n == 0 {
			return fail(errors.New("connection closed"))
		}
		off += n
	}
	return buf, fd, nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err != nil {
			for _, x := range fds {
				unix.Close(x)
			}
			return nil, err
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// downWriter encodes the parent's frames.
type downWriter struct {
	buf []byte
}

func newDownWriter() *downWriter { return &downWriter{} }

// A frame down is the encoding of its downMsg, then the stack copies of
// the threads it carries: encoded in it, they would be copied into its
// buffer (fresh memory, a page fault each 4 KiB: 14 ms for a 512-thread
// capture's 2.5 MB) and the child would copy them out again, one
// allocation a thread. They are sent from where the capture holds them,
// and the child's threads use them where its frame holds them:
//
//	its length (4) | downMsg | stacks (4) | each one's length (4) | the stacks
func (w *downWriter) send(sock int, m *downMsg, fd int) error {
	m, stacks := withoutStacks(m)
	head := encodeValue(append(w.buf[:0], 0, 0, 0, 0), m)
	w.buf = head[:0]
	binary.LittleEndian.PutUint32(head, uint32(len(head)-4))
	head = binary.LittleEndian.AppendUint32(head, uint32(len(stacks)))
	for _, st := range stacks {
		head = binary.LittleEndian.AppendUint32(head, uint32(len(st)))
	}
	return sendFrameParts(sock, append([][]byte{head}, stacks...), fd)
}

// stackSlots points at the stack copy of each thread m carries, in the
// order its frame sends them: its process's threads, its thread, its
// threads, the threads it checks.
func stackSlots(m *downMsg) []*[]byte {
	var slots []*[]byte
	if m.Proc != nil {
		for i := range m.Proc.Threads {
			slots = append(slots, &m.Proc.Threads[i].Stack)
		}
	}
	if m.Thread != nil {
		slots = append(slots, &m.Thread.Stack)
	}
	for i := range m.Threads {
		slots = append(slots, &m.Threads[i].Stack)
	}
	for _, th := range m.Check {
		if th != nil {
			slots = append(slots, &th.Stack)
		}
	}
	return slots
}

// withoutStacks is m without its threads' stack copies (the structs that
// held them copied: the caller's are left as they are), and those copies.
func withoutStacks(m *downMsg) (*downMsg, [][]byte) {
	if (m.Proc == nil || len(m.Proc.Threads) == 0) && m.Thread == nil && len(m.Threads) == 0 && len(m.Check) == 0 {
		return m, nil
	}
	c := *m
	if m.Proc != nil {
		p := *m.Proc
		p.Threads = slices.Clone(p.Threads)
		c.Proc = &p
	}
	if m.Thread != nil {
		th := *m.Thread
		c.Thread = &th
	}
	c.Threads = slices.Clone(m.Threads)
	if m.Check != nil {
		c.Check = make([]*ptrace.Thread, len(m.Check))
		for i, th := range m.Check {
			if th != nil {
				x := *th
				c.Check[i] = &x
			}
		}
	}
	slots := stackSlots(&c)
	stacks := make([][]byte, len(slots))
	for i, slot := range slots {
		stacks[i], *slot = *slot, nil
	}
	return &c, stacks
}

// downReader decodes them in the child, frame by frame.
type downReader struct{}

func newDownReader() *downReader { return &downReader{} }

func (r *downReader) recv(sock int) (*downMsg, int, error) {
	b, fd, err := recvFrame(sock, maxDown)
	if err != nil {
		return nil, -1, err
	}
	m, err := r.decode(b)
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, -1, err
	}
	return m, fd, nil
}

// decode decodes frame b (see downWriter.send): its threads' stacks are
// left in b, which must not change afterwards.
func (r *downReader) decode(b []byte) (*downMsg, error) {
	bad := errors.New("malformed frame from the parent")
	if len(b) < 4 {
		return nil, bad
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, bad
	}
	var m downMsg
	if err := decodeInto(b[4:4+n], &m, 0); err != nil {
		return nil, err
	}
	rest := b[4+n:]
	slots := stackSlots(&m)
	if len(rest) < 4 || uint64(binary.LittleEndian.Uint32(rest)) != uint64(len(slots)) ||
		uint64(len(rest)-4) < 4*uint64(len(slots)) {
		return nil, bad
	}
	lens, data := rest[4:4+4*len(slots)], rest[4+4*len(slots):]
	for i, slot := range slots {
		l := uint64(binary.LittleEndian.Uint32(lens[4*i:]))
		if l > uint64(len(data)) {
			return nil, bad
		}
		if l > 0 {
			*slot = data[:l:l]
		}
		data = data[l:]
	}
	if len(data) != 0 {
		return nil, bad
	}
	return &m, nil
}

// sendUp encodes and sends m.
func sendUp(sock int, m *upMsg) error {
	return sendFrame(sock, encodeValue(nil, m), -1)
}

// recvUp reads the child's next frame: a call (small) or a result, which
// decodes to at most limit bytes (0: only the codec's bound).
func recvUp(sock int, limit int64) (*upMsg, error) {
	b, fd, err := recvFrame(sock, maxUpResult)
	if fd >= 0 {
		unix.Close(fd) // the child has nothing to hand over
	}
	if err != nil {
		return nil, err
	}
	var m upMsg
	if err := decodeInto(b, &m, limit); err != nil {
		return nil, fmt.Errorf("malformed answer from the sandbox: %v", err)
	}
	if m.Kind != kResolve && m.Kind != kNames && m.Kind != kGo && m.Kind != kRuntime && m.Kind != kRuntimeLocks && m.Kind != kLocks && m.Kind != kSaved && m.Kind != kCachePut && m.Kind != kRecord && m.Kind != kCheckAll && len(b) > maxUpCall {
		return nil, fmt.Errorf("%d-byte %q call from the sandbox (at most %d)", len(b), m.Kind, maxUpCall)
	}
	return &m, nil
}
