//go:build linux

package ptrace

// Reading the target's memory (process_vm_readv: no stop needed) and
// finding the bounds of a thread's stack.

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/procmaps"
)

// knownStackBounds is stackBounds without reading the maps again: the only
// form allowed inside a stop.
func (c *capturer) knownStackBounds(sp uint64) (lo, hi uint64) {
	c.mapsMu.RLock()
	defer c.mapsMu.RUnlock()
	if m, ok := procmaps.Maps(c.p.Maps).Find(sp); ok {
		return m.Start, m.End
	}
	return 0, 0
}

// mapsReadHook, when set (by tests), runs before stackBounds reads the
// maps again.
var mapsReadHook func(pid int)

// stackBounds returns the bounds of the mapping that holds sp, reading the
// maps again (at most every few milliseconds) for a thread born after they
// were read. Never call it while a thread is stopped: a re-read of a large
// process's maps costs about a millisecond.
func (c *capturer) stackBounds(sp uint64) (lo, hi uint64) {
	if lo, hi = c.knownStackBounds(sp); hi != 0 {
		return lo, hi
	}
	c.mapsMu.Lock()
	defer c.mapsMu.Unlock()
	if m, ok := procmaps.Maps(c.p.Maps).Find(sp); ok { // (read again meanwhile)
		return m.Start, m.End
	}
	if time.Since(c.mapsAt) > 5*time.Millisecond {
		if mapsReadHook != nil {
			mapsReadHook(c.p.PID)
		}
		if nm, err := readMaps(c.p); err == nil {
			c.p.Maps = nm
			c.mapsAt = time.Now()
			if m, ok := nm.Find(sp); ok {
				return m.Start, m.End
			}
		}
	}
	return 0, 0
}

// stackLen is how many bytes to copy from sp: up to hi (the end of its
// mapping), at most max.
func stackLen(sp, hi uint64, max int) int {
	if sp == 0 {
		return 0
	}
	n := uint64(max)
	if hi > sp && hi-sp < n {
		n = hi - sp
	} else if hi == 0 || hi <= sp {
		n = min(64<<10, uint64(max)) // unknown mapping: a modest copy
	}
	return int(n)
}

// readStack copies the stack from sp up to hi (the end of its mapping),
// at most max bytes. Reads are split at page boundaries, so an unreadable
// page ends the copy instead of failing it.
func readStack(pid int, sp, hi uint64, max int) []byte {
	n := stackLen(sp, hi, max)
	if n == 0 {
		return nil
	}
	buf := make([]byte, n)
	got := ReadMemory(pid, buf, sp)
	return buf[:got]
}

// ReadMemory copies target memory at addr into buf, page by page, and
// returns how many bytes were read before the first unreadable page.
//
// It runs inside ptrace stops, on the tracer's goroutine: its page list
// is small enough (1 KiB) that the goroutine's first call needs no
// larger stack (growing it, inside the first stop of a run, cost tens of
// microseconds), and is read in several calls for a copy over 256 KiB.
func ReadMemory(pid int, buf []byte, addr uint64) int {
	const page = 4096
	const maxIov = 64
	var remote [maxIov]unix.RemoteIovec
	total := 0
	for total < len(buf) {
		n := 0
		off := total
		a := addr + uint64(total)
		for n < maxIov && off < len(buf) {
			l := min(page-int(a%page), len(buf)-off)
			remote[n] = unix.RemoteIovec{Base: uintptr(a), Len: l}
			n++
			off += l
			a += uint64(l)
		}
		local := []unix.Iovec{{Base: &buf[total]}}
		local[0].SetLen(off - total)
		got, err := unix.ProcessVMReadv(pid, local, remote[:n], 0)
		if got > 0 {
			total += got
		}
		if err != nil || got < off-(total-got) {
			break
		}
	}
	return total
}

// MemReader reads a live target's memory (io.ReaderAt over its address space).
type MemReader struct{ PID int }

// ReadAt implements io.ReaderAt.
func (m MemReader) ReadAt(p []byte, off int64) (int, error) {
	n := ReadMemory(m.PID, p, uint64(off))
	if n < len(p) {
		return n, fmt.Errorf("reading %#x in pid %d: short read (%d of %d)", off, m.PID, n, len(p))
	}
	return n, nil
}

// ReadMemory implements unwind.Memory.
func (m MemReader) ReadMemory(p []byte, addr uint64) (int, error) {
	return m.ReadAt(p, int64(addr))
}
