//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The child of root runs as a uid and gid of its own, chosen per start
// from childIDBase..childIDBase+childIDCount-1 among those no process on
// the machine has (as real, effective, saved or file-system id, or as a
// supplementary group) and no user or group is named by. Nothing else
// then runs as it: no other process may signal it, trace it, or read its
// /proc files (as any process running as nobody could, when it ran as
// nobody).
//
// The range, 65536 to 98303, lies where no allocator of ids puts anyone:
// above 16 bits (systemd's ordinary users end at 60000, systemd-homed's at
// 60513, DynamicUser= takes 61184 to 65519, nobody is 65534), below the
// subordinate ids useradd hands out from 100000 (/etc/subuid), and far
// below the ranges of containers' ids (524288 on).
const (
	childIDBase  = 65536
	childIDCount = 32768
	// childIDTries bounds the draws before giving up (a machine using
	// most of the range).
	childIDTries = 64
)

// childUser chooses the uid and gid the child of root runs as: one
// number, free as a uid and as a gid (freeIDs), drawn at random in the
// range. The target's ids are never free: it runs as them.
func childUser(t Target) (uint32, uint32, error) {
	used, err := idsInUse()
	if err != nil {
		return 0, 0, fmt.Errorf("no uid of its own for the sandboxed parser (%v)", err)
	}
	mapped := mappedIDs()
	for range childIDTries {
		id := childIDBase + rand.Uint32N(childIDCount)
		if used[id] || !mapped(id) || int(id) == t.UID || int(id) == t.GID || named(id) {
			continue
		}
		return id, id, nil
	}
	return 0, 0, fmt.Errorf("no uid of its own for the sandboxed parser: %d draws from %d..%d were all in use", childIDTries, childIDBase, childIDBase+childIDCount-1)
}

// idsInUse is every uid and gid a running process has, from the Uid,
// Gid and Groups lines of each /proc/PID/status (a process gone meanwhile
// is skipped), kept only within the child's range.
func idsInUse() (map[uint32]bool, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	used := map[uint32]bool{}
	buf := make([]byte, 4096)
	for _, name := range names {
		if !isDigits(name) {
			continue
		}
		for _, line := range bytes.Split(statusHead("/proc/"+name+"/status", buf), []byte("\n")) {
			k, v, ok := bytes.Cut(line, []byte(":"))
			if !ok || !(string(k) == "Uid" || string(k) == "Gid" || string(k) == "Groups") {
				continue
			}
			for _, f := range strings.Fields(string(v)) {
				if id, err := strconv.ParseUint(f, 10, 32); err == nil && id >= childIDBase && id < childIDBase+childIDCount {
					used[uint32(id)] = true
				}
			}
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no processes in /proc")
	}
	return used, nil
}

// statusHead is a status file up to the end of its Groups line, read into
// buf; a Groups line longer than buf (hundreds of groups) makes it read
// the whole file, or the last groups would go unseen (empty: gone).
func statusHead(path string, buf []byte) []byte {
	b := buf[:readHead(path, buf)]
	if g := bytes.Index(b, []byte("\nGroups:")); len(b) < len(buf) || g >= 0 && bytes.IndexByte(b[g+1:], '\n') >= 0 {
		return b
	}
	all, _ := os.ReadFile(path)
	return all
}

// readHead reads the start of a small file into buf (0: unreadable).
func readHead(path string, buf []byte) int {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return 0
	}
	return n
}

// mappedIDs tells whether an id is one stackshot's user namespace has
// for both uids and gids (a container's root may have only 65536).
func mappedIDs() func(uint32) bool {
	uids, gids := readIDMap("/proc/self/uid_map"), readIDMap("/proc/self/gid_map")
	return func(id uint32) bool { return inIDMap(uids, id) && inIDMap(gids, id) }
}

type idRange struct{ first, count uint64 }

// readIDMap reads a uid_map or gid_map (nil: unreadable, taken as the
// whole range).
func readIDMap(path string) []idRange {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []idRange
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		first, err1 := strconv.ParseUint(f[0], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil {
			out = append(out, idRange{first, count})
		}
	}
	return out
}

func inIDMap(m []idRange, id uint32) bool {
	if m == nil {
		return true
	}
	for _, r := range m {
		if uint64(id) >= r.first && uint64(id) < r.first+r.count {
			return true
		}
	}
	return false
}

// named reports whether a user or a group has id (files may then belong
// to it).
func named(id uint32) bool {
	s := strconv.FormatUint(uint64(id), 10)
	if _, err := user.LookupId(s); err == nil {
		return true
	}
	_, err := user.LookupGroupId(s)
	return err == nil
}
