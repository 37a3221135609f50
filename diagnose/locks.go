package diagnose

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"

	"stackshot/report"
)

// Futex operations (linux/futex.h).
const (
	FUTEX_WAIT            = 0
	FUTEX_LOCK_PI         = 6
	FUTEX_TRYLOCK_PI      = 8
	FUTEX_WAIT_BITSET     = 9
	FUTEX_LOCK_PI2        = 13
	FUTEX_PRIVATE_FLAG    = 128
	FUTEX_CLOCK_REALTIME  = 256
	FUTEX_TID_MASK        = 0x3fffffff
	FUTEX_OWNER_DIED      = 0x40000000
	FUTEX_WAITERS         = 0x80000000
	futexCmdMask          = ^uint64(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)
	maxTID                = 1 << 22 // PID_MAX_LIMIT
	mutexInconsistent     = 0x7fffffff
	mutexNotRecoverable   = 0x7ffffffe
	maxScanBytes          = 4096 // the lock call's frames, searched for the mutex (PI deadlock)
	maxInnerFrames        = 8    // user frames searched for the lock call
	sizeofPthreadMutex    = 40
	sizeofPthreadRWLock   = 56
	condSignalsOffset     = 40 // pthread_cond_t.__data.__g_signals[0]
	pthreadMutexKindMask  = 3
	pthreadMutexRobust    = 16
	pthreadMutexPI        = 32
	pthreadMutexPP        = 64
	pthreadMutexPShared   = 128
	pthreadMutexElision   = 256
	pthreadMutexNoElision = 512
	pthreadRWLockWRLocked = 2 // __readers bit: a writer holds the lock

	pthreadMutexPrioCeilingMask = 0xfff80000 // PTHREAD_MUTEX_PRIO_CEILING_MASK
)

// pthread_mutex_t (bits/struct_mutex.h, x86-64): __lock int @0, __count
// unsigned @4, __owner int @8, __nusers unsigned @12, __kind int @16,
// __spins short @20, __elision short @22, __list @24 (two pointers).
type mutexWords struct {
	Lock   uint32
	Count  uint32
	Owner  int32
	NUsers uint32
	Kind   int32
}

// DecodeMutex decodes and checks a pthread_mutex_t; ok is false when the
// bytes cannot be one (too short, a kind glibc never sets).
func DecodeMutex(b []byte) (m mutexWords, ok bool) {
	if len(b) < sizeofPthreadMutex {
		return m, false
	}
	le := binary.LittleEndian
	m = mutexWords{Lock: le.Uint32(b[0:]), Count: le.Uint32(b[4:]), Owner: int32(le.Uint32(b[8:])),
		NUsers: le.Uint32(b[12:]), Kind: int32(le.Uint32(b[16:]))}
	k := m.Kind
	known := int32(pthreadMutexKindMask | pthreadMutexRobust | pthreadMutexPI | pthreadMutexPP |
		pthreadMutexPShared | pthreadMutexElision | pthreadMutexNoElision)
	if k < 0 || k&^known != 0 || (k&pthreadMutexPI != 0 && k&pthreadMutexPP != 0) {
		return m, false
	}
	return m, true
}

// mutexOwner proves who holds a mutex the thread self waits for in glibc's
// futex-wait slow path (not PI): "" note and the owner, or 0 and why not.
func mutexOwner(m mutexWords, self int, tasks map[int]bool) (int, string) {
	if m.Kind&pthreadMutexPI != 0 {
		return piOwner(m.Lock, self, tasks)
	}
	lock := m.Lock
	if m.Kind&pthreadMutexPP != 0 {
		lock &^= pthreadMutexPrioCeilingMask // the ceiling lives in the high bits
	}
	if lock == 0 {
		return 0, "the mutex was free when read"
	}
	if m.Kind&pthreadMutexRobust != 0 {
		if int32(m.Lock&FUTEX_TID_MASK) != m.Owner {
			return 0, "the mutex's lock word and owner field disagree"
		}
	} else if lock > 2 {
		return 0, "the lock word is not a mutex's"
	}
	if m.Owner == mutexInconsistent || m.Owner == mutexNotRecoverable {
		return 0, "the owner died holding it (robust mutex, inconsistent)"
	}
	if m.NUsers == 0 || m.Owner <= 0 {
		return 0, "the mutex records no owner"
	}
	if int(m.Owner) == self && m.Kind&pthreadMutexKindMask != 0 && m.Kind&pthreadMutexKindMask != 3 {
		// Recursive and error-checking mutexes never wait for themselves.
		return 0, "the owner field names the waiter itself"
	}
	return checkOwner(int(m.Owner), tasks)
}

func piOwner(word uint32, self int, tasks map[int]bool) (int, string) {
	o := int(word & FUTEX_TID_MASK)
	if o == 0 {
		return 0, "the PI futex was free when read"
	}
	return checkOwner(o, tasks)
}

func checkOwner(o int, tasks map[int]bool) (int, string) {
	if o <= 0 || o >= maxTID || !tasks[o] {
		return 0, "the recorded owner is not a thread of the process"
	}
	return o, ""
}

// pthread_rwlock_t (bits/struct_rwlock.h, x86-64): __readers @0, __writers
// @4, __wrphase_futex @8, __writers_futex @12, __pad3 @16, __pad4 @20,
// __cur_writer @24, __shared @28, __rwelision @32, __pad1[7] @33, __pad2
// @40, __flags @48.
type rwlockWords struct {
	Readers, Writers, WrPhase, WritersFutex uint32
	CurWriter                               int32
	Shared                                  int32
	Flags                                   uint32
}

// DecodeRWLock decodes and checks a pthread_rwlock_t.
func DecodeRWLock(b []byte) (r rwlockWords, ok bool) {
	if len(b) < sizeofPthreadRWLock {
		return r, false
	}
	le := binary.LittleEndian
	r = rwlockWords{Readers: le.Uint32(b[0:]), Writers: le.Uint32(b[4:]), WrPhase: le.Uint32(b[8:]),
		WritersFutex: le.Uint32(b[12:]), CurWriter: int32(le.Uint32(b[24:])), Shared: int32(le.Uint32(b[28:])),
		Flags: le.Uint32(b[48:])}
	pads := uint64(le.Uint32(b[16:])) | uint64(le.Uint32(b[20:])) | le.Uint64(b[40:])
	for _, c := range b[33:40] {
		pads |= uint64(c)
	}
	if pads != 0 || r.Flags > 2 || (r.Shared != 0 && r.Shared != 1) || r.CurWriter < 0 {
		return r, false
	}
	return r, true
}

// lockClass is what the innermost user frames show a futex wait is for.
type lockClass int

const (
	classNone lockClass = iota
	classMutex
	classRWLock
	classCondvar
	classSemaphore
	classRustMutex
	classJoin  // pthread_join: the futex is the joined thread's tid
	classStdio // a stdio function waiting for its FILE's _IO_lock_t
)

// isWrapper tells the functions between a lock call and the futex system
// call (names normalized by normName). These tables are switches, not
// maps: a map is built by the package's initialiser at every start of
// stackshot.
func isWrapper(n string) bool {
	switch n {
	case "lll_lock_wait", "futex_abstimed_wait_common", "futex_abstimed_wait_common64",
		"futex_abstimed_wait64", "futex_abstimed_wait_cancelable64", "futex_lock_pi64",
		"futex_wait", "futex_wait_simple", "syscall", "futex_clocklock64":
		return true
	}
	return false
}

// classOf is the kind of lock a lock function (normalized) waits for.
func classOf(n string) lockClass {
	switch n {
	case "pthread_mutex_lock", "pthread_mutex_lock_full",
		"pthread_mutex_timedlock", "pthread_mutex_timedlock64",
		"pthread_mutex_clocklock", "pthread_mutex_clocklock64",
		"pthread_mutex_clocklock_common", "pthread_mutex_cond_lock",
		"pthread_mutex_cond_lock_full":
		return classMutex
	case "pthread_rwlock_wrlock", "pthread_rwlock_rdlock",
		"pthread_rwlock_timedwrlock64", "pthread_rwlock_timedrdlock64",
		"pthread_rwlock_timedwrlock", "pthread_rwlock_timedrdlock",
		"pthread_rwlock_clockwrlock64", "pthread_rwlock_clockrdlock64",
		"pthread_rwlock_clockwrlock", "pthread_rwlock_clockrdlock",
		"pthread_rwlock_wrlock_full64", "pthread_rwlock_rdlock_full64",
		"pthread_rwlock_wrlock_full", "pthread_rwlock_rdlock_full":
		return classRWLock
	case "pthread_cond_wait", "pthread_cond_timedwait",
		"pthread_cond_timedwait64", "pthread_cond_clockwait",
		"pthread_cond_clockwait64", "pthread_cond_wait_common":
		return classCondvar
	case "sem_wait", "sem_timedwait", "sem_clockwait",
		"sem_timedwait64", "sem_clockwait64", "new_sem_wait",
		"new_sem_wait_slow64", "new_sem_wait_slow",
		"do_futex_wait":
		return classSemaphore
	case "pthread_join", "pthread_clockjoin_ex", "pthread_timedjoin_np",
		"pthread_clockjoin_np", "pthread_timedjoin_ex":
		return classJoin
	}
	return classNone
}

// normName strips what varies between builds of the same function: the
// symbol version, glibc's internal __GI_ alias prefix, leading underscores
// and a compiler clone suffix (".isra.0").
func normName(n string) string {
	if i := strings.IndexByte(n, '@'); i >= 0 {
		n = n[:i]
	}
	n = strings.TrimPrefix(n, "__GI_")
	n = strings.TrimLeft(n, "_")
	if i := strings.IndexByte(n, '.'); i > 0 {
		n = n[:i]
	}
	return n
}

// rustClass recognizes Rust std's futex-based locks by their demangled
// paths (std::sys::sync::mutex::futex::Mutex::lock_contended and older
// std::sys::unix::locks::futex_mutex::Mutex::lock_contended).
func rustClass(n string) (lockClass, bool) {
	// Methods are named "<std::sys::sync::mutex::futex::Mutex>::lock_contended".
	n = strings.TrimPrefix(n, "<")
	if !strings.HasPrefix(n, "std::") {
		return classNone, false
	}
	switch {
	case strings.Contains(n, "::futex_wait"):
		return classNone, true // a wrapper
	case strings.Contains(n, "::Mutex>::lock_contended") || strings.Contains(n, "::Mutex::lock_contended"):
		return classRustMutex, false
	case strings.Contains(n, "Condvar::wait"):
		return classCondvar, false
	}
	return classNone, false
}

// classify finds the lock call among the innermost user frames: the first
// frame that is not a futex wrapper. It returns the class and the index of
// that frame in frames (-1 when none).
func classify(frames []report.Frame) (lockClass, int) {
	seen := 0
	for i := range frames {
		f := &frames[i]
		if f.Kind != "user" {
			continue
		}
		if seen++; seen > maxInnerFrames {
			break
		}
		if c, wrap := rustClass(f.Function); wrap {
			continue
		} else if c != classNone {
			return c, i
		}
		n := normName(f.Function)
		if isWrapper(n) {
			continue
		}
		if n == "lll_lock_wait_private" {
			// glibc's private low-level lock: a stdio lock when a stdio
			// function asked for it (_IO_lock_lock is a macro).
			return stdioCaller(frames[i+1:]), i
		}
		if strings.HasPrefix(n, "condvar_") {
			// glibc's condvar internals wait on the condvar's internal
			// lock (__g1_orig_size), not on a signal: not the wait
			// the address computation below assumes.
			return classNone, -1
		}
		if f.Inlined && classOf(n) == classNone {
			// Inlined helpers (futex_wait, lll_mutex_lock_optimized)
			// belong to the physical frame whose function follows.
			seen--
			continue
		}
		return classOf(n), i
	}
	return classNone, -1
}

// readStable reads n bytes at addr twice and returns them only when both
// reads agree: a lock that changes while it is read proves nothing.
func readStable(mem io.ReaderAt, addr uint64, n int) ([]byte, bool) {
	if mem == nil || addr == 0 || addr > 1<<63 {
		return nil, false
	}
	a, b := make([]byte, n), make([]byte, n)
	if k, err := mem.ReadAt(a, int64(addr)); k != n || err != nil {
		return nil, false
	}
	if k, err := mem.ReadAt(b, int64(addr)); k != n || err != nil {
		return nil, false
	}
	return a, bytes.Equal(a, b)
}

const notePIParked = "the kernel reported a PI deadlock (EDEADLK); glibc parked this thread forever"

const noteUnreadable = "the lock's memory could not be read, or changed while read"

// WaitingFor says what thread t (blocked in futex(2)) waits for, from its
// stack and the lock's memory; nil when it is not waiting on a lock the
// stack identifies.
func WaitingFor(t *report.Thread, mem io.ReaderAt, tasks map[int]bool) *report.WaitingFor {
	sc := t.Syscall
	if sc == nil || !sc.InCall || sc.Name != "futex" {
		return nil
	}
	class, at := classify(t.Frames)
	if class == classNone {
		return nil
	}
	uaddr, cmd := sc.Args[0], sc.Args[1]&futexCmdMask
	switch class {
	case classCondvar:
		// The futex is __g_signals[g] (g = 0 or 1) of an 8-aligned cond.
		base := uaddr - condSignalsOffset
		if uaddr%8 != 0 {
			base -= 4
		}
		return &report.WaitingFor{Kind: report.WaitCondvar, Address: base, Note: "a condition variable has no owner"}
	case classSemaphore:
		return &report.WaitingFor{Kind: report.WaitSemaphore, Address: uaddr, Note: "a semaphore has no owner"}
	case classRustMutex:
		return &report.WaitingFor{Kind: report.WaitRustMutex, Address: uaddr,
			Note: "Rust's std Mutex does not record its owner"}
	case classRWLock:
		return rwlockWait(t, uaddr, mem, tasks)
	case classJoin:
		return joinWait(t, uaddr, sc.Args[2], mem, tasks)
	case classStdio:
		return stdioWait(uaddr, mem, tasks)
	}
	// A mutex.
	switch cmd {
	case FUTEX_LOCK_PI, FUTEX_LOCK_PI2, FUTEX_TRYLOCK_PI:
		w := &report.WaitingFor{Kind: report.WaitPIMutex, Address: uaddr}
		b, ok := readStable(mem, uaddr, sizeofPthreadMutex)
		if !ok {
			// The word alone is the kernel's protocol: try just it.
			if b, ok = readStable(mem, uaddr, 4); !ok {
				w.Note = noteUnreadable
				return w
			}
		}
		if len(b) >= sizeofPthreadMutex {
			if m, ok := DecodeMutex(b); ok && m.Kind&pthreadMutexPI == 0 {
				w.Note = "a PI futex inside a mutex that is not PI"
				return w
			}
		}
		owner, note := piOwner(binary.LittleEndian.Uint32(b), t.TID, tasks)
		setOwner(w, owner, note)
		return w
	case FUTEX_WAIT, FUTEX_WAIT_BITSET:
	default:
		return nil
	}
	lo, hi := lockFrame(t, at)
	if lo != 0 && uaddr >= lo && uaddr < hi {
		return parkedAfterDeadlock(t, lo, hi, mem, tasks)
	}
	w := &report.WaitingFor{Kind: report.WaitMutex, Address: uaddr}
	b, ok := readStable(mem, uaddr, sizeofPthreadMutex)
	if !ok {
		w.Note = noteUnreadable
		return w
	}
	m, ok := DecodeMutex(b)
	if !ok {
		w.Note = "the memory is not a pthread mutex (its kind is out of range)"
		return w
	}
	if m.Kind&pthreadMutexPI != 0 {
		w.Kind = report.WaitPIMutex
		w.Note = "a PI mutex waited for without the PI protocol"
		return w
	}
	owner, note := mutexOwner(m, t.TID, tasks)
	setOwner(w, owner, note)
	if owner == 0 && m.Kind&pthreadMutexPShared != 0 && m.Kind&pthreadMutexPI == 0 && m.Owner > 0 &&
		int(m.Owner) < maxTID && !tasks[int(m.Owner)] && m.NUsers != 0 && m.Lock != 0 {
		// A process-shared mutex owned elsewhere: which process is for
		// the caller to prove (it reads /proc; see ForeignTID).
		w.ForeignTID = int(m.Owner)
		w.Note = "the owner is a thread of another process"
	}
	return w
}

func setOwner(w *report.WaitingFor, owner int, note string) {
	if owner != 0 {
		w.OwnerTID = &owner
		w.Note = ""
		return
	}
	w.Note = note
}

// lockFrame returns the stack range from the thread's stack pointer to the
// top of the lock call's frame (its caller's stack pointer).
func lockFrame(t *report.Thread, at int) (lo, hi uint64) {
	if at < 0 || t.Syscall == nil {
		return 0, 0
	}
	sp := t.Frames[at].SP
	for j := at + 1; j < len(t.Frames); j++ {
		if f := &t.Frames[j]; f.Kind == "user" && f.SP > sp {
			hi = f.SP
			break
		}
	}
	lo = t.Syscall.SP
	if hi <= lo || hi-lo > maxScanBytes {
		return 0, 0
	}
	return lo, hi
}

// parkedAfterDeadlock handles glibc's answer to EDEADLK from FUTEX_LOCK_PI
// (pthread_mutex_lock.c: "Delay the thread indefinitely"): the thread waits
// forever on a futex in its own lock call's frame. The mutex it wanted is
// found only as a pointer left in that frame (a saved register or
// argument): every word there that points at a checked PI mutex held by
// another live thread is a candidate, and only a single candidate is
// believed.
func parkedAfterDeadlock(t *report.Thread, lo, hi uint64, mem io.ReaderAt, tasks map[int]bool) *report.WaitingFor {
	w := &report.WaitingFor{Kind: report.WaitPIMutex, Note: notePIParked}
	if mem == nil {
		return w
	}
	buf := make([]byte, hi-lo)
	if n, _ := mem.ReadAt(buf, int64(lo)); n != len(buf) {
		return w
	}
	// The words of the frame, then the registers at the stop: what the
	// lock call kept in a callee-saved register is there, not on the
	// stack.
	words := make([]uint64, 0, len(buf)/8+len(t.CalleeSaved))
	for off := 0; off+8 <= len(buf); off += 8 {
		words = append(words, binary.LittleEndian.Uint64(buf[off:]))
	}
	words = append(words, t.CalleeSaved...)
	var found uint64
	var owner int
	for _, v := range words {
		// The pointer itself, or glibc's &mutex->__data.__kind.
		for _, cand := range []uint64{v, v - 16} {
			if cand == 0 || cand%8 != 0 || cand == found || (cand >= lo && cand < hi) {
				continue
			}
			b, ok := readStable(mem, cand, sizeofPthreadMutex)
			if !ok {
				continue
			}
			m, ok := DecodeMutex(b)
			if !ok || m.Kind&pthreadMutexPI == 0 {
				continue
			}
			o, _ := piOwner(m.Lock, t.TID, tasks)
			if o == 0 || o == t.TID {
				continue
			}
			if found != 0 {
				return w // two candidates: no answer
			}
			found, owner = cand, o
		}
	}
	if found != 0 {
		w.Address = found
		w.OwnerTID = &owner
	} else if t.CalleeSaved == nil {
		w.Note = notePIParked + "; " + notePINoRegs
	}
	return w
}

const notePINoRegs = "its mutex is not in its frame, and the thread was read without a stop (--mode stop gives its registers)"

// rwlockWait identifies a rwlock from the futex a reader or writer waits
// on: __readers (@0), __wrphase_futex (@8) or __writers_futex (@12). Only
// a single base address whose every field checks out is believed.
func rwlockWait(t *report.Thread, uaddr uint64, mem io.ReaderAt, tasks map[int]bool) *report.WaitingFor {
	w := &report.WaitingFor{Kind: report.WaitRWLock}
	var found uint64
	var words rwlockWords
	for _, off := range []uint64{8, 12, 0} {
		if uaddr < off {
			continue
		}
		base := uaddr - off
		if base%8 != 0 {
			continue
		}
		b, ok := readStable(mem, base, sizeofPthreadRWLock)
		if !ok {
			continue
		}
		r, ok := DecodeRWLock(b)
		if !ok {
			continue
		}
		if found != 0 {
			w.Note = "the futex could be in two different rwlocks"
			return w
		}
		found, words = base, r
	}
	if found == 0 {
		w.Address = uaddr
		w.Note = "the memory is not a pthread rwlock"
		return w
	}
	w.Address = found
	if words.Readers&pthreadRWLockWRLocked == 0 || words.CurWriter == 0 {
		w.Note = "held by readers, which a rwlock does not record"
		return w
	}
	owner, note := checkOwner(int(words.CurWriter), tasks)
	setOwner(w, owner, note)
	return w
}
