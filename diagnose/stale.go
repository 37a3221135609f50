package diagnose

import (
	"fmt"
	"io"

	"stackshot/report"
)

// A plain (not robust, not PI) mutex records only its owner's TID. When
// the owner exits holding it, the kernel reuses the TID in time, and the
// thread given it reads as the owner. Which thread locked the mutex, and
// when, is not recorded, so a reused TID cannot be told from a real
// owner in general; what is provable is this: a recorded owner that is
// itself blocked waiting for the same mutex either locked it twice (a
// self-deadlock) or never locked it (a reused TID). Neither answer can be
// proved, so no owner is named (a robust mutex's owner is provable: the
// kernel marks it dead at its exit; an error-checking or recursive one
// never waits for itself).

const noteOwnerWaitsFmt = "the recorded owner, thread %d, itself waits for this mutex: it locked it twice, or the owner exited and its TID was given to that thread (glibc records only the TID)"

// staleOwners drops the owner of every plain mutex whose recorded owner
// waits for that same mutex (see above).
func staleOwners(threads []report.Thread, mem io.ReaderAt) {
	waitsOn := map[int]uint64{}
	for i := range threads {
		if w := threads[i].WaitingFor; w != nil && w.Kind == report.WaitMutex && w.Address != 0 {
			waitsOn[threads[i].TID] = w.Address
		}
	}
	plain := map[uint64]bool{}
	for i := range threads {
		w := threads[i].WaitingFor
		if w == nil || w.Kind != report.WaitMutex || w.OwnerTID == nil || w.Address == 0 {
			continue
		}
		o := *w.OwnerTID
		if waitsOn[o] != w.Address {
			continue
		}
		p, ok := plain[w.Address]
		if !ok {
			p = plainMutex(w.Address, mem)
			plain[w.Address] = p
		}
		if p {
			w.OwnerTID, w.OwnerName = nil, ""
			w.Note = fmt.Sprintf(noteOwnerWaitsFmt, o)
		}
	}
}

// plainMutex says whether the mutex at addr is neither robust nor PI;
// unreadable or not a mutex: true (the owner it gave is then doubted).
func plainMutex(addr uint64, mem io.ReaderAt) bool {
	b, ok := readStable(mem, addr, sizeofPthreadMutex)
	if !ok {
		return true
	}
	m, ok := DecodeMutex(b)
	return !ok || m.Kind&(pthreadMutexRobust|pthreadMutexPI) == 0
}
