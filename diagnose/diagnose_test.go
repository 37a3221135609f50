package diagnose

import (
	"encoding/binary"
	"fmt"
	"io"
	"testing"

	"stackshot/report"
)

func owner(v int) *int { return &v }

func waiting(tid int, addr uint64, own int) report.Thread {
	t := report.Thread{TID: tid, WaitingFor: &report.WaitingFor{Kind: report.WaitMutex, Address: addr}}
	if own != 0 {
		t.WaitingFor.OwnerTID = owner(own)
	}
	return t
}

func TestDeadlockCycles(t *testing.T) {
	threads := []report.Thread{
		waiting(30, 0x30, 10), waiting(10, 0x10, 20), waiting(20, 0x20, 30), // ring of three
		waiting(40, 0x40, 10), // waits on the ring, is not in it
		waiting(50, 0x50, 50), // itself
		waiting(60, 0x60, 0),  // owner unknown
		{TID: 70},             // not waiting
		waiting(80, 0x80, 90), waiting(90, 0x90, 80),
	}
	got := fmt.Sprint(Deadlocks(threads))
	want := "[{[10 20 30] [16 32 48]} {[50] [80]} {[80 90] [128 144]}]"
	if got != want {
		t.Errorf("cycles %s, want %s", got, want)
	}
	if d := Deadlocks([]report.Thread{waiting(1, 1, 2), waiting(2, 2, 3)}); len(d) != 0 {
		t.Errorf("a chain is not a cycle: %v", d)
	}
}

func mutexBytes(lock, count uint32, own int32, nusers uint32, kind int32) []byte {
	b := make([]byte, 40)
	le := binary.LittleEndian
	le.PutUint32(b[0:], lock)
	le.PutUint32(b[4:], count)
	le.PutUint32(b[8:], uint32(own))
	le.PutUint32(b[12:], nusers)
	le.PutUint32(b[16:], uint32(kind))
	return b
}

func TestMutexOwnerChecks(t *testing.T) {
	tasks := map[int]bool{100: true, 200: true}
	for _, c := range []struct {
		name string
		b    []byte
		self int
		want int
	}{
		{"normal", mutexBytes(2, 0, 200, 1, 0), 100, 200},
		{"recursive", mutexBytes(2, 1, 200, 1, 1), 100, 200},
		{"errorcheck", mutexBytes(2, 0, 200, 1, 2), 100, 200},
		{"adaptive", mutexBytes(2, 0, 200, 1, 3), 100, 200},
		{"robust", mutexBytes(0x80000000|200, 0, 200, 1, 16), 100, 200},
		{"priority protect, ceiling 5", mutexBytes(5<<19|2, 0, 200, 1, 64), 100, 200},
		{"priority protect, free", mutexBytes(5<<19, 0, 200, 1, 64), 100, 0},
		{"robust word disagrees", mutexBytes(0x80000000|100, 0, 200, 1, 16), 100, 0},
		{"free", mutexBytes(0, 0, 200, 1, 0), 100, 0},
		{"owner not a thread", mutexBytes(2, 0, 300, 1, 0), 100, 0},
		{"owner exited (0)", mutexBytes(2, 0, 0, 1, 0), 100, 0},
		{"lock word not a mutex's", mutexBytes(7, 0, 200, 1, 0), 100, 0},
		{"no users", mutexBytes(2, 0, 200, 0, 0), 100, 0},
		{"self, normal: a self-deadlock", mutexBytes(2, 0, 100, 1, 0), 100, 100},
		{"self, recursive: impossible", mutexBytes(2, 1, 100, 1, 1), 100, 0},
		{"inconsistent", mutexBytes(0x80000000|200, 0, mutexInconsistent, 1, 16), 100, 0},
	} {
		m, ok := DecodeMutex(c.b)
		if !ok {
			t.Errorf("%s: not decoded", c.name)
			continue
		}
		if got, _ := mutexOwner(m, c.self, tasks); got != c.want {
			t.Errorf("%s: owner %d, want %d", c.name, got, c.want)
		}
	}
	for _, kind := range []int32{0x7777, -1, 4 << 10, pthreadMutexPI | pthreadMutexPP} {
		if _, ok := DecodeMutex(mutexBytes(2, 0, 200, 1, kind)); ok {
			t.Errorf("kind %#x accepted", kind)
		}
	}
	if _, ok := DecodeMutex(make([]byte, 39)); ok {
		t.Error("a short read decoded")
	}
}

func TestClassify(t *testing.T) {
	fr := func(names ...string) []report.Frame {
		out := []report.Frame{{Kind: "kernel", Function: "futex_wait"}}
		for _, n := range names {
			inl := n[0] == '+'
			if inl {
				n = n[1:]
			}
			out = append(out, report.Frame{Kind: "user", Function: n, Inlined: inl})
		}
		return out
	}
	for _, c := range []struct {
		frames []report.Frame
		want   lockClass
	}{
		{fr("+futex_wait", "__GI___lll_lock_wait", "+lll_mutex_lock_optimized", "___pthread_mutex_lock", "main"), classMutex},
		{fr("__lll_lock_wait", "pthread_mutex_lock@@GLIBC_2.2.5", "main"), classMutex},
		{fr("__futex_lock_pi64", "__pthread_mutex_lock_full", "main"), classMutex},
		{fr("__futex_abstimed_wait_common", "___pthread_rwlock_rdlock", "main"), classRWLock},
		{fr("__futex_abstimed_wait_common", "___pthread_cond_wait", "main"), classCondvar},
		{fr("__lll_lock_wait", "__pthread_mutex_cond_lock", "___pthread_cond_wait"), classMutex},
		{fr("__futex_abstimed_wait_common", "__new_sem_wait_slow64.constprop.0", "main"), classSemaphore},
		{fr("syscall", "<std::sys::sync::mutex::futex::Mutex>::lock_contended", "main"), classRustMutex},
		{fr("__lll_lock_wait_private", "malloc"), classNone}, // an internal lock
		{fr("__lll_lock_wait_private", "__vfprintf_internal", "printf", "main"), classStdio},
		{fr("__lll_lock_wait_private", "_IO_puts", "main"), classStdio},
		{fr("__futex_abstimed_wait_common", "__pthread_clockjoin_ex", "main"), classJoin},
		{fr("+futex_wait", "+__condvar_acquire_lock", "+__condvar_cancel_waiting", "__pthread_cond_wait_common", "main"), classNone},
		{fr("my_futex_wait_loop", "pthread_mutex_lock"), classNone},
		{fr("syscall", "main"), classNone},
	} {
		if got, _ := classify(c.frames); got != c.want {
			t.Errorf("%v: class %d, want %d", c.frames, got, c.want)
		}
	}
}

// FuzzLockDecoders feeds arbitrary bytes, as a hostile target's memory
// would be, to the mutex and rwlock decoders and the owner checks.
func FuzzLockDecoders(f *testing.F) {
	f.Add(mutexBytes(2, 0, 200, 1, 0), 100)
	f.Add(mutexBytes(0x80000000|200, 0, 200, 1, 16|32), 200)
	f.Add(make([]byte, 56), 1)
	f.Add(stdioImage(), 1) // a stdio lock held by thread 100
	f.Fuzz(func(t *testing.T, b []byte, self int) {
		tasks := map[int]bool{100: true, 200: true, self: true}
		if m, ok := DecodeMutex(b); ok {
			if o, note := mutexOwner(m, self, tasks); o != 0 && (!tasks[o] || note != "") {
				t.Fatalf("owner %d (note %q) is not a thread", o, note)
			}
		}
		if r, ok := DecodeRWLock(b); ok {
			if o, _ := checkOwner(int(r.CurWriter), tasks); o != 0 && !tasks[o] {
				t.Fatalf("writer %d is not a thread", o)
			}
		}
		// The same bytes as the memory at 0x1000 holding a stdio lock
		// (its owner a struct pthread in them) or a joined thread's tid.
		mem := fuzzMem{base: 0x1000, b: b}
		if w := stdioWait(0x1000, mem, tasks); w.OwnerTID != nil && !tasks[*w.OwnerTID] {
			t.Fatalf("stdio lock owner %d is not a thread", *w.OwnerTID)
		}
		th := &report.Thread{TID: self}
		if w := joinWait(th, 0x1000+pthreadTID, uint64(self), mem, tasks); w.OwnerTID != nil && !tasks[*w.OwnerTID] {
			t.Fatalf("joined thread %d is not a thread", *w.OwnerTID)
		}
	})
}

// fuzzMem is memory of b at base, nothing elsewhere.
type fuzzMem struct {
	base uint64
	b    []byte
}

func (m fuzzMem) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	if a < m.base || a-m.base > uint64(len(m.b)) || uint64(len(p)) > uint64(len(m.b))-(a-m.base) {
		return 0, io.EOF
	}
	return copy(p, m.b[a-m.base:]), nil
}

// stdioImage is memory at 0x1000 holding a held _IO_lock_t whose owner is
// a struct pthread (at 0x1040) of thread 100.
func stdioImage() []byte {
	const pd = 0x40
	b := make([]byte, pd+pthreadTID+8)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 1)
	le.PutUint32(b[4:], 1)
	le.PutUint64(b[8:], 0x1000+pd)
	le.PutUint64(b[pd+pthreadTCB:], 0x1000+pd)
	le.PutUint64(b[pd+pthreadSelf:], 0x1000+pd)
	le.PutUint32(b[pd+pthreadTID:], 100)
	return b
}

func TestStdioImageOwner(t *testing.T) {
	w := stdioWait(0x1000, fuzzMem{base: 0x1000, b: stdioImage()}, map[int]bool{100: true})
	if w.OwnerTID == nil || *w.OwnerTID != 100 || w.Kind != report.WaitStdio {
		t.Fatalf("%+v, want a stdio lock held by 100", w)
	}
	// Its descriptor's self-pointer broken: no owner.
	b := stdioImage()
	b[0x40+pthreadSelf] ^= 8
	if w := stdioWait(0x1000, fuzzMem{base: 0x1000, b: b}, map[int]bool{100: true}); w.OwnerTID != nil {
		t.Fatalf("owner %d from a broken descriptor", *w.OwnerTID)
	}
}
