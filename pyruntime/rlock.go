package pyruntime

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"stackshot/report"
)

// An RLock object (_threadmodule.c's rlockobject, 3.8 to 3.13): after the
// object header, the lock it sleeps on (a PyThread_type_lock: on Linux a
// pointer to a sem_t), the owner's thread ident (its pthread_t) and the
// recursion count.
const (
	rlockLock  = 16
	rlockOwner = 24
	rlockCount = 32
	rlockSize  = 40
	tpName     = 24 // PyTypeObject.tp_name
	rlockType  = "_thread.RLock"
	// maxStackScan bounds the stack read to find the RLock object.
	maxStackScan = 64 << 10
)

// NameRLockOwners names the owner of each RLock a thread of rp waits for
// (NameLockWaits said which): the RLock object is found among the words
// of the thread's stack between its innermost frame and rlock_acquire's
// caller (rlock_acquire keeps self there, or a callee saved it), and is
// believed only when its type is named _thread.RLock and its lock is the
// very semaphore the thread sleeps on. The owner it records (a pthread_t)
// is a thread state's thread_id, whose native id is the owner's tid.
// threads must have been matched (ByTID). The wait's address becomes the
// RLock object's (what id() of it says in Python). What does not check
// out names no owner, and the note says why.
func (rt *Runtime) NameRLockOwners(rp *report.Process, threads []Thread) {
	byIdent := map[uint64]int{}
	for i := range threads {
		if threads[i].ThreadID != 0 && threads[i].NativeID != 0 {
			byIdent[threads[i].ThreadID] = threads[i].NativeID
		}
	}
	names := map[int]string{}
	for i := range rp.Threads {
		names[rp.Threads[i].TID] = rp.Threads[i].ShownName(rp.Comm)
	}
	for i := range rp.Threads {
		t := &rp.Threads[i]
		w := t.WaitingFor
		if w == nil || w.Kind != report.WaitPythonRLock || w.OwnerTID != nil {
			continue
		}
		obj, why := rt.findRLock(t, w.Address)
		if obj == 0 {
			w.Note = strings.Replace(w.Note, rlockNotRead, "its owner is not known ("+why+")", 1)
			continue
		}
		var b [rlockSize]byte
		if _, err := rt.Mem.ReadAt(b[:], int64(obj)); err != nil {
			continue
		}
		ident := binary.LittleEndian.Uint64(b[rlockOwner:])
		count := binary.LittleEndian.Uint64(b[rlockCount:])
		tid, ok := byIdent[ident]
		var note string
		switch {
		case ident == 0 || count == 0:
			note = "it is free now (released while read)"
		case !ok:
			note = fmt.Sprintf("it is held by thread ident %#x, which no Python thread of the process has", ident)
		default:
			note = fmt.Sprintf("held %d time(s) (its semaphore %#x)", count, w.Address)
			w.OwnerTID, w.OwnerName = &tid, names[tid]
		}
		w.Address = obj // (id() of the lock in Python)
		w.Note = strings.Replace(w.Note, rlockNotRead, note, 1)
	}
}

// findRLock finds the RLock object whose lock is sem on thread t's stack,
// or says why it was not found.
func (rt *Runtime) findRLock(t *report.Thread, sem uint64) (uint64, string) {
	if sem == 0 {
		return 0, "the semaphore's address is unknown"
	}
	lo, hi := uint64(0), uint64(0)
	for j, f := range t.Frames {
		if f.Kind != "user" {
			continue
		}
		if lo == 0 {
			lo = f.SP
		}
		if f.Function == "rlock_acquire" || strings.HasPrefix(f.Function, "rlock_acquire.") {
			for _, c := range t.Frames[j+1:] {
				if c.Kind == "user" {
					hi = c.SP
					break
				}
			}
			break
		}
	}
	if lo == 0 || hi <= lo || hi-lo > maxStackScan {
		return 0, "its stack between the wait and rlock_acquire was not read"
	}
	stack := make([]byte, hi-lo)
	if _, err := rt.Mem.ReadAt(stack, int64(lo)); err != nil {
		return 0, fmt.Sprintf("reading its stack: %v", err)
	}
	seen := map[uint64]bool{}
	var found []uint64
	for off := 0; off+8 <= len(stack); off += 8 {
		v := binary.LittleEndian.Uint64(stack[off:])
		if v == 0 || v%8 != 0 || seen[v] {
			continue
		}
		seen[v] = true
		if rt.isRLockOn(v, sem) {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Sprintf("%d RLock objects on its stack sleep on semaphore %#x", len(found), sem)
	}
	return found[0], ""
}

// isRLockOn reports whether obj is an RLock object whose lock is sem.
func (rt *Runtime) isRLockOn(obj, sem uint64) bool {
	var b [rlockSize]byte
	if _, err := rt.Mem.ReadAt(b[:], int64(obj)); err != nil {
		return false
	}
	if binary.LittleEndian.Uint64(b[rlockLock:]) != sem {
		return false
	}
	typ := binary.LittleEndian.Uint64(b[rt.Layout.ObType:])
	var p [8]byte
	if typ == 0 {
		return false
	}
	if _, err := rt.Mem.ReadAt(p[:], int64(typ+tpName)); err != nil {
		return false
	}
	name := make([]byte, len(rlockType)+1)
	if _, err := rt.Mem.ReadAt(name, int64(binary.LittleEndian.Uint64(p[:]))); err != nil {
		return false
	}
	return bytes.Equal(name, append([]byte(rlockType), 0))
}
