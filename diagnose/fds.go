package diagnose

import (
	"encoding/binary"
	"io"

	"stackshot/report"
)

// FDNamer says what a process's file descriptors are (procmaps.FDReader
// for a live process).
type FDNamer interface {
	// Want lists the descriptors about to be named (so that what they
	// share is read once).
	Want(fds []int)
	Name(fd int) (report.FD, bool)
	// EpollWatched is the first max descriptors the epoll instance
	// watches and how many it watches (-1 unknown).
	EpollWatched(epfd, max int) ([]int, int, bool)
}

// How a system call names its descriptors.
const (
	fdArg0   = iota + 1 // the first argument is the descriptor
	fdEpoll             // the first argument is an epoll instance
	fdPoll              // poll/ppoll: (struct pollfd *fds, nfds_t nfds, ...)
	fdSelect            // select/pselect6: (int nfds, fd_set *r, fd_set *w, fd_set *e, ...)
)

// fdCalls are the blocking system calls on descriptors.
var fdCalls = map[string]int{
	"read": fdArg0, "write": fdArg0, "readv": fdArg0, "writev": fdArg0, "pread64": fdArg0,
	"pwrite64": fdArg0, "preadv": fdArg0, "pwritev": fdArg0, "preadv2": fdArg0, "pwritev2": fdArg0,
	"recvfrom": fdArg0, "recvmsg": fdArg0, "recvmmsg": fdArg0, "sendto": fdArg0, "sendmsg": fdArg0,
	"sendmmsg": fdArg0, "accept": fdArg0, "accept4": fdArg0, "connect": fdArg0, "flock": fdArg0,
	"epoll_wait": fdEpoll, "epoll_pwait": fdEpoll, "epoll_pwait2": fdEpoll,
	"poll": fdPoll, "ppoll": fdPoll, "select": fdSelect, "pselect6": fdSelect,
}

// maxPollRead bounds the pollfd entries (or fd_set bits) read from the
// target for one thread.
const (
	maxPollRead   = 256
	maxSelectBits = 8192
)

// NameFDs says, for every thread of p blocked in a system call on file
// descriptors, what they are (Thread.FDWait): the descriptor of a read,
// an epoll_wait's instance and what it watches, the descriptors a poll or
// select was given (read from the arguments in mem; nil mem: not read).
// Then it says what each lock's owner is doing (OwnerStates).
func NameFDs(p *report.Process, fds FDNamer, mem io.ReaderAt) {
	if fds == nil {
		return
	}
	sets := make([][]int, len(p.Threads))
	counts := make([]int, len(p.Threads))
	var all []int
	seen := map[int]bool{}
	type watched struct {
		fds []int
		n   int
		ok  bool
	}
	epolls := map[int]watched{} // (a pool's threads share one instance)
	epoll := func(fd int) ([]int, int, bool) {
		w, ok := epolls[fd]
		if !ok {
			w.fds, w.n, w.ok = fds.EpollWatched(fd, report.MaxWatched)
			epolls[fd] = w
		}
		return w.fds, w.n, w.ok
	}
	for i := range p.Threads {
		sets[i], counts[i] = callFDs(&p.Threads[i], epoll, mem)
		for _, fd := range sets[i] {
			if !seen[fd] { // (a pool's threads share their descriptors)
				seen[fd] = true
				all = append(all, fd)
			}
		}
	}
	fds.Want(all)
	names := map[int]*report.FD{} // (threads share descriptors)
	name := func(fd int) *report.FD {
		if f, ok := names[fd]; ok {
			return f
		}
		var out *report.FD
		if f, ok := fds.Name(fd); ok {
			out = &f
		}
		names[fd] = out
		return out
	}
	for i := range p.Threads {
		t := &p.Threads[i]
		sc := t.Syscall
		if sc == nil || !sc.InCall || fdCalls[sc.Name] == 0 {
			continue
		}
		w := &report.FDWait{WatchedCount: -1}
		switch fdCalls[sc.Name] {
		case fdArg0:
			w.FD = name(int(int32(sc.Args[0])))
		case fdEpoll:
			if w.FD = name(int(int32(sc.Args[0]))); w.FD != nil && w.FD.Kind == report.FDEpoll {
				w.WatchedCount = counts[i]
			}
		case fdPoll, fdSelect:
			w.WatchedCount = counts[i]
		}
		watched := sets[i]
		if fdCalls[sc.Name] <= fdEpoll && len(watched) > 0 {
			watched = watched[1:] // (the call's own descriptor)
		}
		for _, fd := range watched {
			if f := name(fd); f != nil && len(w.Watched) < report.MaxWatched {
				w.Watched = append(w.Watched, *f)
			}
		}
		if w.FD != nil || len(w.Watched) > 0 || w.WatchedCount >= 0 {
			t.FDWait = w
		}
	}
	OwnerStates(p)
}

// callFDs lists the descriptors thread t's system call is on: its first
// argument, or that and the ones it watches (at most MaxWatched), and how
// many it watches (-1 unknown).
func callFDs(t *report.Thread, epoll func(int) ([]int, int, bool), mem io.ReaderAt) ([]int, int) {
	sc := t.Syscall
	if sc == nil || !sc.InCall {
		return nil, -1
	}
	switch fdCalls[sc.Name] {
	case fdArg0:
		if fd := int32(sc.Args[0]); fd >= 0 {
			return []int{int(fd)}, -1
		}
	case fdEpoll:
		fd := int(int32(sc.Args[0]))
		if fd < 0 {
			return nil, -1
		}
		w, n, ok := epoll(fd)
		if !ok {
			n = -1
		}
		return append([]int{fd}, w...), n
	case fdPoll:
		return pollFDs(mem, sc.Args[0], sc.Args[1])
	case fdSelect:
		return selectFDs(mem, sc.Args[0], sc.Args[1:4])
	}
	return nil, -1
}

// pollFDs reads the descriptors of a poll's struct pollfd array (int fd;
// short events, revents: 8 bytes each, little-endian on every
// architecture stackshot reads live), skipping negative ones (poll
// ignores them): the first MaxWatched, and how many there are (-1: more
// entries than maxPollRead, or not all could be read).
func pollFDs(mem io.ReaderAt, addr, n uint64) ([]int, int) {
	if mem == nil || addr == 0 || n == 0 {
		return nil, -1
	}
	all := n <= maxPollRead
	n = min(n, maxPollRead)
	buf := make([]byte, 8*n)
	k, _ := mem.ReadAt(buf, int64(addr))
	all = all && k == len(buf)
	buf = buf[:k-k%8]
	var out []int
	count := 0
	for i := 0; i+8 <= len(buf); i += 8 {
		if fd := int32(binary.LittleEndian.Uint32(buf[i:])); fd >= 0 {
			count++
			if len(out) < report.MaxWatched {
				out = append(out, int(fd))
			}
		}
	}
	if !all {
		count = -1
	}
	return out, count
}

// selectFDs reads the descriptors set in a select's fd_sets (bit fd of a
// bitmap of longs): the first MaxWatched, each once, and how many there
// are (-1: more than maxSelectBits, or not all could be read).
func selectFDs(mem io.ReaderAt, nfds uint64, sets []uint64) ([]int, int) {
	if mem == nil || nfds == 0 {
		return nil, -1
	}
	all := nfds <= maxSelectBits
	nfds = min(nfds, maxSelectBits)
	seen := map[int]bool{}
	var out []int
	buf := make([]byte, (nfds+63)/64*8)
	for _, addr := range sets {
		if addr == 0 {
			continue
		}
		k, _ := mem.ReadAt(buf, int64(addr))
		all = all && k == len(buf)
		for fd := 0; fd < int(nfds) && fd/8 < k; fd++ {
			if buf[fd/8]&(1<<(fd%8)) != 0 && !seen[fd] {
				seen[fd] = true
				if len(out) < report.MaxWatched {
					out = append(out, fd)
				}
			}
		}
	}
	if !all {
		return out, -1
	}
	return out, len(seen)
}

// OwnerStates says, for every wait with a known owner in p, what the
// owner is doing as p shows it (WaitingFor.OwnerState): blocked in a
// system call (with the descriptor named), waiting for something nobody
// is known to hold (a semaphore, a lock whose owner is unknown), or
// running. An owner that waits for a lock with a known owner is left to
// its own edge.
func OwnerStates(p *report.Process) {
	byTID := make(map[int]*report.Thread, len(p.Threads))
	for i := range p.Threads {
		byTID[p.Threads[i].TID] = &p.Threads[i]
	}
	for i := range p.Threads {
		w := p.Threads[i].WaitingFor
		if w == nil || w.OwnerTID == nil {
			continue
		}
		o := byTID[*w.OwnerTID]
		if o == nil || o == &p.Threads[i] {
			continue
		}
		st := &report.OwnerState{State: o.State}
		switch {
		case o.WaitingFor != nil && o.WaitingFor.OwnerTID != nil:
			continue // (the owner's own edge, or the deadlock, says it)
		case o.WaitingFor != nil:
			ow := *o.WaitingFor
			ow.OwnerState, ow.Note = nil, ""
			st.Waiting = &ow
		case o.Syscall != nil && o.Syscall.InCall:
			st.Syscall = o.Syscall.Name
			if o.FDWait != nil {
				st.FD = o.FDWait.FD
			}
		case o.State != "R":
			continue // (neither running nor in a call: nothing to say)
		}
		w.OwnerState = st
	}
}
