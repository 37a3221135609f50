//go:build linux

package live

import (
	"os"
	"strconv"

	"stackshot/procmaps"
	"stackshot/report"
)

// foreignOwners names the process of each process-shared lock's owner
// that is no thread of the target (WaitingFor.ForeignTID): its thread
// group from /proc/TID/status, believed only when that process maps the
// same shared object the lock lies in (a TID reused by an unrelated
// process maps nothing of the target's), the target and that process
// share our PID namespace (else the TID names another task here: a
// target in another one keeps its note), and the TID still
// belongs to that process after its maps were read.
func foreignOwners(rp *report.Process) {
	var maps procmaps.Maps
	for i := range rp.Threads {
		w := rp.Threads[i].WaitingFor
		if w == nil || w.ForeignTID == 0 {
			continue
		}
		if maps == nil {
			if !samePIDNamespace(rp.PID) {
				return
			}
			var err error
			if maps, err = procmaps.ReadMaps(rp.PID); err != nil {
				return
			}
		}
		pid, comm := sharedOwner(maps, w.Address, w.ForeignTID, rp.PID)
		if pid != 0 {
			w.OwnerPID, w.OwnerComm = pid, comm
			w.Note = ""
		}
	}
}

func samePIDNamespace(pid int) bool {
	ours, err1 := os.Readlink("/proc/self/ns/pid")
	theirs, err2 := os.Readlink(procmaps.Proc + "/" + strconv.Itoa(pid) + "/ns/pid")
	return err1 == nil && err2 == nil && ours == theirs
}

// sharedOwner is the process (and its name) of thread tid when it maps
// the shared object holding addr in the target's maps; 0 otherwise.
func sharedOwner(maps procmaps.Maps, addr uint64, tid, self int) (int, string) {
	m, ok := maps.Find(addr)
	if !ok || len(m.Perms) < 4 || m.Perms[3] != 's' || m.Inode == 0 {
		return 0, ""
	}
	st, err := procmaps.ReadStatus(tid)
	if err != nil || st.Tgid <= 0 || st.Tgid == self {
		return 0, ""
	}
	// The owner recorded its id in its own PID namespace: one nested in
	// ours would have given a number that here names another task.
	if !samePIDNamespace(st.Tgid) {
		return 0, ""
	}
	theirs, err := procmaps.ReadMaps(st.Tgid)
	if err != nil {
		return 0, ""
	}
	found := false
	for j := range theirs {
		o := &theirs[j]
		if o.Inode == m.Inode && o.Dev() == m.Dev() && len(o.Perms) >= 4 && o.Perms[3] == 's' {
			found = true
			break
		}
	}
	if !found {
		return 0, ""
	}
	again, err := procmaps.ReadStatus(tid)
	if err != nil || again.Tgid != st.Tgid {
		return 0, ""
	}
	owner, err := procmaps.ReadStatus(st.Tgid)
	if err != nil {
		return 0, ""
	}
	return st.Tgid, owner.Name
}
