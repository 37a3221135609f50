package hotspot

import (
	"fmt"
	"strings"

	"stackshot/report"
)

// Wait is what a JavaThread waits for.
type Wait struct {
	Kind   string // report.WaitMonitor, WaitObjectWait or WaitJUCLock
	Object uint64 // the Java object (the monitor's, or the j.u.c lock)
	Class  string // its class ("java.lang.Object")
	// OwnerTID is the owner's OS thread id (0: none known).
	OwnerTID int
	Note     string
}

// maxJUCSupers bounds the superclasses searched for
// AbstractOwnableSynchronizer.
const maxJUCSupers = 16

// aqsClass is the class whose exclusiveOwnerThread names a j.u.c lock's
// owner.
const aqsClass = "java/util/concurrent/locks/AbstractOwnableSynchronizer"

// Waits reads what each of ths waits for: the monitor it blocks entering
// and its owner (a JavaThread, or a lock record on a thread's stack: a
// stack lock inflated when others contended for it), the object it waits
// on in Object.wait, or the j.u.c lock it is parked on and that lock's
// exclusive owner. Keyed by TID; threads that wait for none are absent.
func (vm *VM) Waits(ths []Thread) map[int]*Wait {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	out := map[int]*Wait{}
	for i := range ths {
		t := &ths[i]
		var w *Wait
		switch {
		case t.PendingMonitor != 0:
			w = vm.monitorWait(t.PendingMonitor, ths)
			w.Kind = report.WaitMonitor
		case t.WaitingMonitor != 0:
			w = vm.monitorWait(t.WaitingMonitor, ths)
			w.Kind, w.OwnerTID, w.Note = report.WaitObjectWait, 0, "in Object.wait"
		case t.State == "blocked" && t.threadObj != 0:
			w = vm.jucWait(t, ths)
		}
		if w != nil {
			out[t.TID] = w
		}
	}
	return out
}

// monitorWait reads an ObjectMonitor: its object (through the weak
// handle ObjectMonitor::_object holds) and its owner.
func (vm *VM) monitorWait(om uint64, ths []Thread) *Wait {
	w := &Wait{}
	l, m := vm.l, vm.m
	if h, err := m.u64(om + l.monitorObject); err == nil && h != 0 {
		w.Object, _ = m.u64(h + l.oopHandleObj)
		w.Class = vm.className(w.Object)
	}
	owner, err := m.u64(om + l.monitorOwner)
	switch {
	case err != nil:
		w.Note = "its monitor could not be read"
	case owner == 0:
		w.Note = "no owner recorded"
	default:
		if t := ownerOf(owner, ths); t != nil {
			w.OwnerTID = t.TID
		} else {
			w.Note = fmt.Sprintf("owner %#x is no Java thread", owner)
		}
	}
	return w
}

// ownerOf finds the thread an ObjectMonitor's owner word names: a
// JavaThread, or a BasicLock in some thread's stack.
func ownerOf(owner uint64, ths []Thread) *Thread {
	for i := range ths {
		if ths[i].Addr == owner {
			return &ths[i]
		}
	}
	for i := range ths {
		t := &ths[i]
		if t.StackSize != 0 && t.StackSize <= t.StackBase && owner < t.StackBase && owner >= t.StackBase-t.StackSize {
			return t
		}
	}
	return nil
}

// jucWait reads a parked thread's blocker (Thread.parkBlocker): when it
// is an AbstractOwnableSynchronizer, the thread waits for that lock and
// its exclusiveOwnerThread holds it.
func (vm *VM) jucWait(t *Thread, ths []Thread) *Wait {
	k := vm.klassOf(t.threadObj)
	off := vm.fieldOffset(k, "parkBlocker")
	if k == 0 || off == 0 {
		return nil
	}
	blocker := vm.oopField(t.threadObj, off)
	bk := vm.klassOf(blocker)
	if bk == 0 || !vm.subclassOf(bk, aqsClass) {
		return nil
	}
	w := &Wait{Kind: report.WaitJUCLock, Object: blocker, Class: vm.className(blocker)}
	ownerOff := vm.fieldOffset(bk, "exclusiveOwnerThread")
	if ownerOff == 0 {
		w.Note = "its owner field was not found"
		return w
	}
	owner := vm.oopField(blocker, ownerOff)
	if owner == 0 {
		w.Note = "no exclusive owner (a shared or released lock)"
		return w
	}
	for i := range ths {
		if ths[i].threadObj == owner {
			w.OwnerTID = ths[i].TID
			return w
		}
	}
	w.Note = "its owner is no running Java thread"
	return w
}

// subclassOf reports whether class k is name or extends it.
func (vm *VM) subclassOf(k uint64, name string) bool {
	for i := 0; k != 0 && i < maxJUCSupers; i++ {
		if vm.klassName(k) == name {
			return true
		}
		k, _ = vm.m.u64(k + vm.l.klassSuper)
	}
	return false
}

// className is an object's class, as Java names it ("" unknown).
func (vm *VM) className(obj uint64) string {
	n := vm.klassName(vm.klassOf(obj))
	return strings.NewReplacer("/", ".", "+", "/").Replace(n)
}
