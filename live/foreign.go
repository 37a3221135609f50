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
// process maps nothing of the target's), it is in the target's PID
// namespace (the TID is that namespace's: in another, the number names
// another task), and the TID still belongs to that process after its
// maps were read. A target in another PID namespace than ours records
// that namespace's ids: the owner's is found among the tasks of the
// processes in it, by their NSpid lines (pidns.go).
func foreignOwners(rp *report.Process) {
	var maps procmaps.Maps
	var ns string
	same := true
	for i := range rp.Threads {
		w := rp.Threads[i].WaitingFor
		if w == nil || w.ForeignTID == 0 {
			continue
		}
		if maps == nil {
			if ns = pidNS(rp.PID); ns == "" {
				return
			}
			same = ns == pidNS(os.Getpid())
			var err error
			if maps, err = procmaps.ReadMaps(rp.PID); err != nil {
				return
			}
		}
		tid := w.ForeignTID
		if !same {
			if tid = hostTID(ns, tid); tid == 0 {
				continue
			}
		}
		pid, comm := sharedOwner(maps, w.Address, tid, rp.PID, ns)
		if pid != 0 && (same || hostTID(ns, w.ForeignTID) == tid) {
			w.OwnerPID, w.OwnerComm = pid, comm
			w.Note = ""
		}
	}
}

func samePIDNamespace(pid int) bool {
	ours, theirs := pidNS(os.Getpid()), pidNS(pid)
	return ours != "" && ours == theirs
}

// pidNS is the PID namespace pid is in ("pid:[4026531836]"), "" unknown.
func pidNS(pid int) string {
	s, err := os.Readlink(procmaps.Proc + "/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return ""
	}
	return s
}

// maxNSScan bounds the processes looked at for a namespace's task.
const maxNSScan = 1 << 16

// hostTID is our id of the task whose id in PID namespace ns is id
// (the last of its NSpid line), among the processes in ns; 0 none.
func hostTID(ns string, id int) int {
	d, err := os.Open(procmaps.Proc)
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(maxNSScan)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pidNS(pid) != ns {
			continue
		}
		tids, _ := procmaps.Tasks(pid)
		for _, t := range tids {
			if st, err := procmaps.ReadTaskStatus(pid, t); err == nil && len(st.NSpid) > 0 &&
				st.NSpid[0] == t && st.NSpid[len(st.NSpid)-1] == id {
				return t
			}
		}
	}
	return 0
}

// sharedOwner is the process (and its name) of thread tid (our id) when
// it is in PID namespace ns and maps the shared object holding addr in
// the target's maps; 0 otherwise.
func sharedOwner(maps procmaps.Maps, addr uint64, tid, self int, ns string) (int, string) {
	m, ok := maps.Find(addr)
	if !ok || len(m.Perms) < 4 || m.Perms[3] != 's' || m.Inode == 0 {
		return 0, ""
	}
	st, err := procmaps.ReadStatus(tid)
	if err != nil || st.Tgid <= 0 || st.Tgid == self {
		return 0, ""
	}
	// The owner recorded its id in its own PID namespace: in another
	// than the target's, the number names another task.
	if pidNS(st.Tgid) != ns {
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
