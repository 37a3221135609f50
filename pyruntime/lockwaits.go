package pyruntime

import (
	"fmt"
	"path"
	"strings"

	"stackshot/report"
)

// lockAcquirers are the native functions of CPython's _thread module that
// block acquiring a threading lock, the wait kind of each, the lock's
// class and what its note says first.
var lockAcquirers = []struct{ fn, kind, class, note string }{
	{"lock_PyThread_acquire_lock", report.WaitPythonLock, "threading.Lock", "it records no owner"},
	{"rlock_acquire", report.WaitPythonRLock, "threading.RLock", rlockNotRead},
}

// rlockNotRead is the note of an RLock wait until NameRLockOwners reads
// its owner (which replaces it).
const rlockNotRead = "its owner is not read"

// A waiter is a function of the standard library that waits on a
// threading.Lock for something other than its release (Condition.wait
// for a notify, Queue.get for an item): what the thread waits for is
// said by the outermost of a chain of them, innermost first, which starts
// with a starter one.
type waiter struct {
	file, fn string // the module's file name, the function's qualified name
	class    string
	note     string
	starter  bool // (a chain starts only with it: Queue.get blocking in its own `with` waits for the queue's mutex, no item)
}

var waiters = []waiter{
	{"threading.py", "Condition.wait", "threading.Condition", "it waits to be notified", true},
	{"threading.py", "Condition.wait_for", "threading.Condition", "it waits to be notified", false},
	{"threading.py", "Semaphore.acquire", "threading.Semaphore", "it waits for a release", false},
	{"threading.py", "Event.wait", "threading.Event", "it waits to be set", false},
	{"threading.py", "Barrier._wait", "threading.Barrier", "it waits for the other threads", false},
	{"threading.py", "Barrier.wait", "threading.Barrier", "it waits for the other threads", false},
	{"threading.py", "Thread._wait_for_tstate_lock", "threading.Thread", "it waits for the thread to end", true},
	{"threading.py", "Thread.join", "threading.Thread", "it waits for the thread to end", false},
	{"queue.py", "Queue.get", "queue.Queue", "it waits for an item", false},
	{"queue.py", "Queue.put", "queue.Queue", "it waits for a free slot", false},
}

// waiterOf is the waiter frame f runs, or nil. Before 3.11 a frame has no
// qualified name: its name alone matches the one waiter of that name,
// "wait" and "wait_for" the Condition's (what an Event or a Barrier waits
// in is then said to be a Condition, which it holds).
func waiterOf(f *report.Frame) *waiter {
	file := path.Base(f.File)
	for i := range waiters {
		w := &waiters[i]
		if w.file == file && w.fn == f.Function {
			return w
		}
	}
	if strings.Contains(f.Function, ".") {
		return nil
	}
	var found *waiter
	for i := range waiters {
		w := &waiters[i]
		if w.file == file && strings.HasSuffix(w.fn, "."+f.Function) {
			if found != nil && found.class != w.class {
				return &waiters[0] // (wait: Condition, Event, Barrier)
			}
			found = w
		}
	}
	return found
}

// NameLockWaits says of each thread of rp blocked on a semaphore inside
// one of the _thread module's acquire functions that it waits for a
// Python lock, of which class (the Lock or RLock it acquires, or the
// Condition, Semaphore, Event, Barrier, Thread or queue.Queue whose
// method waits on one: see waiters), what that means for its owner, and
// at which Python frame it asked (the first outside those methods). A
// Lock records no owner: none is named. An RLock records one:
// NameRLockOwners reads it.
func NameLockWaits(rp *report.Process) {
	for i := range rp.Threads {
		t := &rp.Threads[i]
		if t.WaitingFor == nil || t.WaitingFor.Kind != report.WaitSemaphore {
			continue
		}
		for j, f := range t.Frames {
			k := -1
			for n, a := range lockAcquirers {
				if f.Kind == "user" && (f.Function == a.fn || strings.HasPrefix(f.Function, a.fn+".")) {
					k = n
				}
			}
			if k < 0 {
				continue
			}
			a := lockAcquirers[k]
			class, note := a.class, a.note
			var py []*report.Frame
			for n := j + 1; n < len(t.Frames); n++ {
				if t.Frames[n].Kind == "python" {
					py = append(py, &t.Frames[n])
				}
			}
			asked := 0
			if a.kind == report.WaitPythonLock && len(py) > 0 {
				if w := waiterOf(py[0]); w != nil && w.starter {
					for asked < len(py) {
						w := waiterOf(py[asked])
						if w == nil {
							break
						}
						if asked == 0 || w.class != waiters[0].class {
							// (every waiter waits in a Condition: the
							// outermost other one says which for)
							class, note = w.class, w.note
						}
						asked++
					}
				}
			}
			if asked == len(py) && asked > 0 {
				asked-- // (nothing called them: the outermost asked)
			}
			if asked < len(py) {
				note += fmt.Sprintf("; asked at %s (%s:%d)", py[asked].Function, py[asked].File, py[asked].Line)
			}
			t.WaitingFor.Kind, t.WaitingFor.Class, t.WaitingFor.Note = a.kind, class, note
			break
		}
	}
}
