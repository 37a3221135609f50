//go:build linux

package ptrace

// Keeping stackshot's own threads off the CPUs the target's running
// threads are on.
//
// A thread that is running when it is stopped stays frozen until it gets
// its CPU back after the detach. The stop wakes the tracer on that CPU (it
// has just gone idle), and stackshot's other threads queue there too when
// no CPU is idle; once detached, the thread waits behind them for up to a
// scheduler slice. With 1 spinning thread on 2 CPUs that wait was most of
// a dump's freeze: 0.9 ms against 0.2 ms with no dump, and against 0.3–0.4
// ms once stackshot kept to the other CPU. Outside the stops it is the
// same competition: a stackshot thread on a busy thread's CPU takes time
// from it.
//
// So once a capture knows which CPUs its running threads are on, every
// stackshot thread is kept off them, when other CPUs are allowed, and so
// are the threads of its companions (the sandboxed parser, a child that
// does most of a dump's work after the stops). Where
// every allowed CPU runs a target thread there is nothing to gain, and
// the mask stackshot started with stands. It only changes where
// stackshot's own threads run, never anything of the target's.

import (
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"stackshot/procmaps"
)

var own struct {
	mu       sync.Mutex
	started  unix.CPUSet // the mask stackshot started with
	applied  unix.CPUSet // the mask its threads have now
	known    bool        // started and applied were read
	disabled bool        // the mask could not be read: leave it alone
	// companions are processes, children of stackshot, whose threads
	// are moved with stackshot's own (Companion).
	companions map[int]bool
}

// setBusy adds cpu to set when the thread that last ran there, in state
// state (kernel: a kernel thread), is running.
func setBusy(set *unix.CPUSet, state string, kernel bool, cpu int) {
	if state == "R" && !kernel && cpu >= 0 && cpu < len(set)*64 {
		set.Set(cpu)
	}
}

// keepOff keeps stackshot's threads off the CPUs in busy (the CPUs the
// target's running threads are on), or lets them back on every CPU they
// started with when busy is empty or covers them all.
func keepOff(busy *unix.CPUSet) {
	own.mu.Lock()
	defer own.mu.Unlock()
	if own.disabled {
		return
	}
	if !own.known {
		if err := unix.SchedGetaffinity(0, &own.started); err != nil {
			own.disabled = true
			return
		}
		own.applied, own.known = own.started, true
	}
	want := own.started
	for i := range want {
		want[i] &^= busy[i]
	}
	if want.Count() == 0 {
		want = own.started
	}
	if want == own.applied {
		return
	}
	setAllThreads(os.Getpid(), &want)
	for pid := range own.companions {
		setAllThreads(pid, &want)
	}
	own.applied = want
}

// Companion makes keepOff move the threads of process pid, a child of
// stackshot's, with stackshot's own, starting with the mask they have
// now. The caller must call release before it reaps the child: until
// then pid cannot name another process.
func Companion(pid int) (release func()) {
	own.mu.Lock()
	defer own.mu.Unlock()
	if own.companions == nil {
		own.companions = map[int]bool{}
	}
	own.companions[pid] = true
	if own.known && own.applied != own.started {
		setAllThreads(pid, &own.applied)
	}
	return func() {
		own.mu.Lock()
		defer own.mu.Unlock()
		delete(own.companions, pid)
	}
}

// Settled gives companion pid's threads the mask stackshot's have now,
// once pid has put back the masks it changed itself (Gather): a change
// keepOff made meanwhile would otherwise be lost.
func Settled(pid int) {
	own.mu.Lock()
	defer own.mu.Unlock()
	if own.companions[pid] && own.known {
		setAllThreads(pid, &own.applied)
	}
}

// Gather moves every thread of stackshot's process onto the CPU the
// caller is running on, and returns what gives them back the mask the
// caller's thread had. It is for a call that has every thread do a system
// call (Go's change of user: syscall.Setresuid and the like), which
// signals each thread and waits for it: on a virtual machine whose idle
// CPUs halt, waking a thread on another CPU took 0.4 to 1 ms, and a
// sandboxed child's change of user (then three such calls, as its
// runtime's threads slept) took from 0.4 to 14.6 ms. Gathered, each
// wake-up is on the waker's own CPU.
func Gather() (restore func()) {
	var saved, here unix.CPUSet
	var cpu uint32
	_, _, errno := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0)
	if errno != 0 || int(cpu) >= len(here)*64 || unix.SchedGetaffinity(0, &saved) != nil {
		return func() {}
	}
	pid := os.Getpid()
	here.Set(int(cpu))
	setAllThreads(pid, &here)
	return func() { setAllThreads(pid, &saved) }
}

// setAllThreads gives every thread of process pid (stackshot or a
// companion) the mask set. A thread inherits its creator's mask, so a
// second listing catches those born while the first was being applied.
func setAllThreads(pid int, set *unix.CPUSet) {
	done := map[int]bool{}
	for pass := 0; pass < 2; pass++ {
		tids, err := procmaps.Tasks(pid)
		if err != nil {
			return
		}
		for _, tid := range tids {
			if !done[tid] {
				done[tid] = true
				unix.SchedSetaffinity(tid, set) // (a thread that has just exited: nothing to do)
			}
		}
	}
}
