//go:build linux

package live

import (
	"stackshot/diagnose"
	"stackshot/procmaps"
	"stackshot/report"
)

// A target in another PID namespace (a container) records its own
// namespace's thread ids in its locks: a glibc mutex's owner, a rwlock's
// writer, a PI futex, a struct pthread's tid. Compared with our ids they
// would name the wrong thread, so its locks are read in its namespace's
// ids: each thread's own id from the NSpid line of
// /proc/PID/task/TID/status (the last of its ids, the first being ours),
// and the owners found are turned back into ours.

const noteNSUnmapped = "the owner's id in the target's PID namespace names none of its threads"

// nsTIDs maps each of pid's threads (tasks: our ids) to its id in its
// own PID namespace; nil, true when pid shares ours (nothing to
// translate); ok false when it does not and a thread's id there could
// not be read (an owner cannot be proved then).
func nsTIDs(pid int, tasks map[int]bool) (ns map[int]int, ok bool) {
	if samePIDNamespace(pid) {
		return nil, true
	}
	ns = make(map[int]int, len(tasks))
	for tid := range tasks {
		st, err := procmaps.ReadTaskStatus(pid, tid)
		if err != nil {
			continue // exited since: it holds nothing now
		}
		if len(st.NSpid) < 2 || st.NSpid[0] != tid {
			return nil, false // an old kernel, or /proc not ours
		}
		ns[tid] = st.NSpid[len(st.NSpid)-1]
	}
	return ns, true
}

// inTargetNamespace runs find (the lock reader: it sets threads'
// WaitingFor) over rp with its threads' ids, and the task set, in the
// target's namespace (ns: ours to theirs), then gives every thread and
// every owner found back its id here and finds the cycles again. A
// thread with no id there (it exited) gets a negative one meanwhile,
// which no lock can name; an owner id that maps back to no thread is
// dropped. Waits a runtime recorded before (Java, Python) are left as
// they are: their owners were not read from lock words here.
func inTargetNamespace(rp *report.Process, tasks map[int]bool, ns map[int]int, find func(map[int]bool)) {
	back := make(map[int]int, len(ns))
	nsTasks := make(map[int]bool, len(ns))
	for host, id := range ns {
		if tasks[host] {
			back[id], nsTasks[id] = host, true
		}
	}
	host := make([]int, len(rp.Threads))
	kept := make([]bool, len(rp.Threads))
	for i := range rp.Threads {
		th := &rp.Threads[i]
		host[i] = th.TID
		kept[i] = th.WaitingFor != nil && report.RuntimeWait(th.WaitingFor.Kind)
		if id, ok := ns[th.TID]; ok {
			th.TID = id
		} else {
			th.TID = -th.TID
		}
	}
	find(nsTasks)
	for i := range rp.Threads {
		th := &rp.Threads[i]
		th.TID = host[i]
		w := th.WaitingFor
		if w == nil || kept[i] || w.OwnerTID == nil {
			continue
		}
		if h, ok := back[*w.OwnerTID]; ok {
			w.OwnerTID = &h
		} else {
			w.OwnerTID, w.OwnerName, w.Note = nil, "", noteNSUnmapped
		}
	}
	rp.Deadlocks = diagnose.Deadlocks(rp.Threads)
}
