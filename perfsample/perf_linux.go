//go:build linux

package perfsample

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultStackBytes is how much user stack a sample copies when Config
// says nothing: perf's own default for --call-graph dwarf.
const DefaultStackBytes = 8 << 10

// Config says how to sample.
type Config struct {
	Freq       int // samples per second of each thread's CPU time
	StackBytes int // user stack per sample (0: DefaultStackBytes; at most MaxStackBytes)
}

// RefusedError means the kernel does not let this process open perf
// events on the target (perf_event_paranoid, no CAP_PERFMON, a seccomp
// filter, a kernel without perf events): the caller samples another way.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string {
	switch {
	case errors.Is(e.Err, unix.EACCES), errors.Is(e.Err, unix.EPERM):
		p, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
		return fmt.Sprintf("perf_event_open: %v (kernel.perf_event_paranoid is %s, no CAP_PERFMON, or a seccomp filter)",
			e.Err, trimNL(p))
	case errors.Is(e.Err, unix.ENOSYS), errors.Is(e.Err, unix.ENOENT), errors.Is(e.Err, unix.EOPNOTSUPP):
		return fmt.Sprintf("perf_event_open: %v; this kernel has no perf events", e.Err)
	}
	return "perf_event_open: " + e.Err.Error()
}

func (e *RefusedError) Unwrap() error { return e.Err }

func trimNL(b []byte) string {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	if len(b) > 8 {
		b = b[:8]
	}
	return string(b)
}

func refused(err error) bool {
	for _, e := range []error{unix.EACCES, unix.EPERM, unix.ENOSYS, unix.ENOENT, unix.EOPNOTSUPP, unix.EINVAL} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ring is one thread's event and its mmap'd ring buffer.
type ring struct {
	fd   int
	mem  []byte
	page *unix.PerfEventMmapPage
	data []byte // the ring, a power of two long
}

// Set holds a process's per-thread events. Use it from one goroutine.
type Set struct {
	pid      int
	attr     unix.PerfEventAttr
	pages    int // data pages per ring
	rings    map[int]*ring
	scratch  []byte // a record that wraps around its ring's end
	smp      Sample
	seen     map[int]bool
	userOnly bool

	Lost uint64 // samples the kernel dropped: a ring was full
	Bad  uint64 // records that did not parse (dropped)
	// Err is why the last thread that could not get an event did not
	// (the per-user bound on locked memory for rings, out of files).
	Err    error
	failed map[int]bool // threads that could not get an event: not tried again
}

// Unopened is how many live threads could not get an event: they are not
// sampled.
func (s *Set) Unopened() int { return len(s.failed) }

// UserOnly reports whether kernel profiling was refused, so samples are
// taken only while a thread runs user code: a thread in a system call is
// then not sampled.
func (s *Set) UserOnly() bool { return s.userOnly }

func newAttr(cfg Config) (unix.PerfEventAttr, error) {
	if cfg.Freq <= 0 {
		return unix.PerfEventAttr{}, fmt.Errorf("frequency %d: want a positive frequency", cfg.Freq)
	}
	stack := cfg.StackBytes
	if stack <= 0 {
		stack = DefaultStackBytes
	}
	stack = min((stack+7)&^7, MaxStackBytes)
	return unix.PerfEventAttr{
		Type:              unix.PERF_TYPE_SOFTWARE,
		Config:            unix.PERF_COUNT_SW_TASK_CLOCK,
		Size:              uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample:            uint64(cfg.Freq),
		Sample_type:       sampleType,
		Bits:              unix.PerfBitFreq | unix.PerfBitExcludeHv,
		Sample_regs_user:  regsMask,
		Sample_stack_user: uint32(stack),
	}, nil
}

// Probe reports whether this process may open perf events as Open does,
// on its own calling thread: nil, or a *RefusedError.
func Probe(cfg Config) error {
	attr, err := newAttr(cfg)
	if err != nil {
		return err
	}
	attr.Bits |= unix.PerfBitDisabled
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		attr.Bits |= unix.PerfBitExcludeKernel
		fd, err = unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	}
	if err != nil {
		return &RefusedError{Err: err}
	}
	unix.Close(fd)
	return nil
}

// Open opens an event on each of tids (threads of pid). It fails with a
// *RefusedError when the kernel refuses the first thread; a thread that
// exits meanwhile is left out.
func Open(pid int, tids []int, cfg Config) (*Set, error) {
	attr, err := newAttr(cfg)
	if err != nil {
		return nil, err
	}
	// Three samples fit a ring: the sampler reads every
	// tick and keeps only each thread's latest.
	need := 3 * (int(attr.Sample_stack_user) + 512)
	pages := 1
	for pages*os.Getpagesize() < need {
		pages *= 2
	}
	s := &Set{pid: pid, attr: attr, pages: pages, rings: map[int]*ring{}, seen: map[int]bool{}, failed: map[int]bool{},
		scratch: make([]byte, 1<<16)}
	var first error
	for _, tid := range tids {
		err := s.open(tid)
		switch {
		case err == nil || errors.Is(err, unix.ESRCH):
			// (a thread that exited meanwhile is not sampled)
		case len(s.rings) > 0:
			s.failed[tid], s.Err = true, err
		case refused(err):
			s.Close()
			return nil, &RefusedError{Err: err}
		default:
			first = cmp.Or(first, err)
		}
	}
	if len(s.rings) == 0 {
		s.Close()
		return nil, fmt.Errorf("process %d: no thread to sample (%w)", pid, cmp.Or(first, error(unix.ESRCH)))
	}
	return s, nil
}

// open opens tid's event and maps its ring.
func (s *Set) open(tid int) error {
	fd, err := unix.PerfEventOpen(&s.attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil && !s.userOnly && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		// Kernel profiling refused (perf_event_paranoid 2): user only.
		s.attr.Bits |= unix.PerfBitExcludeKernel
		s.userOnly = true
		fd, err = unix.PerfEventOpen(&s.attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	}
	if err != nil {
		return err
	}
	ps := os.Getpagesize()
	var mem []byte
	for pages := s.pages; ; pages /= 2 {
		mem, err = unix.Mmap(fd, 0, (1+pages)*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		// Locked memory is bounded per user: smaller rings, down to one
		// sample's worth.
		if err == nil || !errors.Is(err, unix.EPERM) || pages*ps/2 < int(s.attr.Sample_stack_user)+512 {
			break
		}
		s.pages = pages / 2
	}
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("mapping the perf ring of thread %d: %w", tid, err)
	}
	r := &ring{fd: fd, mem: mem, page: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))}
	off, size := r.page.Data_offset, r.page.Data_size
	if size == 0 { // kernels before 4.1
		off, size = uint64(ps), uint64(len(mem)-ps)
	}
	if off > uint64(len(mem)) || size > uint64(len(mem))-off || size == 0 || size&(size-1) != 0 {
		unix.Munmap(mem)
		unix.Close(fd)
		return fmt.Errorf("perf ring of thread %d: data at %d+%d in %d bytes", tid, off, size, len(mem))
	}
	r.data = mem[off : off+size]
	s.rings[tid] = r
	return nil
}

// Sync opens events on the threads of tids not yet sampled and closes
// those of threads no longer listed (exited).
func (s *Set) Sync(tids []int) {
	clear(s.seen)
	for _, tid := range tids {
		s.seen[tid] = true
		if s.rings[tid] == nil && !s.failed[tid] {
			if err := s.open(tid); err != nil && !errors.Is(err, unix.ESRCH) {
				s.failed[tid], s.Err = true, err
			}
		}
	}
	for tid, r := range s.rings {
		if !s.seen[tid] {
			r.close()
			delete(s.rings, tid)
		}
	}
	for tid := range s.failed {
		if !s.seen[tid] {
			delete(s.failed, tid)
		}
	}
}

// Threads is how many threads have an event open.
func (s *Set) Threads() int { return len(s.rings) }

// Read hands every sample in the rings to fn, oldest first per thread,
// and frees their room. The sample (and its Stack) is valid only during
// the call.
func (s *Set) Read(fn func(*Sample)) {
	for _, r := range s.rings {
		s.drain(r, fn)
	}
}

func (s *Set) drain(r *ring, fn func(*Sample)) {
	head := atomic.LoadUint64(&r.page.Data_head)
	tail := r.page.Data_tail
	size := uint64(len(r.data))
	if head-tail > size { // cannot be: start over from the kernel's head
		s.Bad++
		atomic.StoreUint64(&r.page.Data_tail, head)
		return
	}
	for tail < head {
		off := tail & (size - 1)
		// Records are 8-byte aligned and the ring a power of two: a
		// header never wraps.
		typ := binary.LittleEndian.Uint32(r.data[off:])
		n := uint64(binary.LittleEndian.Uint16(r.data[off+6:]))
		if n < headerSize || n%8 != 0 || n > head-tail {
			s.Bad++
			break
		}
		switch typ {
		case recordSample:
			rec := r.data[off:min(off+n, size)]
			if off+n > size { // wraps: join the two parts
				k := copy(s.scratch, rec)
				copy(s.scratch[k:n], r.data)
				rec = s.scratch[:n]
			}
			if ParseSample(rec, &s.smp) == nil {
				fn(&s.smp)
			} else {
				s.Bad++
			}
		case recordLost:
			if n >= 24 {
				lo := (off + 16) & (size - 1)
				s.Lost += binary.LittleEndian.Uint64(r.data[lo:])
			}
		}
		tail += n
	}
	atomic.StoreUint64(&r.page.Data_tail, head)
}

func (r *ring) close() {
	unix.Munmap(r.mem)
	unix.Close(r.fd)
}

// Close closes every event.
func (s *Set) Close() {
	for tid, r := range s.rings {
		r.close()
		delete(s.rings, tid)
	}
}
