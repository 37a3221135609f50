package diagnose

import (
	"encoding/binary"
	"io"
	"strings"

	"stackshot/report"
)

// The wait-for edges beyond locks that name their owner's TID: a thread
// joining another (pthread_join), a stdio function waiting for its FILE's
// lock (_IO_lock_t records its owner's struct pthread), a process-shared
// mutex whose owner is a thread of another process.
//
// glibc's struct pthread (nptl/descr.h, x86-64, glibc 2.26 to 2.40) begins
// with its tcbhead_t, whose tcb (@0) and self (@16) both point at the
// struct itself; its tid is at 0x2d0. A struct pthread is believed only
// when both self-pointers check out and its tid is a thread of the
// process: a pointer into anything else cannot pass both.
const (
	pthreadTCB   = 0
	pthreadSelf  = 16
	pthreadTID   = 0x2d0
	sizeofIOLock = 16 // _IO_lock_t: int lock @0, int cnt @4, void *owner @8
	maxIOLockCnt = 1 << 20
)

// threadOfPthread is the TID recorded in the struct pthread at pd, when
// pd is one (see above) and the TID is a thread of the process; 0 and why
// not otherwise.
func threadOfPthread(pd uint64, mem io.ReaderAt, tasks map[int]bool) (int, string) {
	if pd == 0 || pd%8 != 0 {
		return 0, "the recorded owner is no thread descriptor"
	}
	head, ok := readStable(mem, pd, pthreadSelf+8)
	if !ok {
		return 0, "the owner's thread descriptor could not be read"
	}
	le := binary.LittleEndian
	if le.Uint64(head[pthreadTCB:]) != pd || le.Uint64(head[pthreadSelf:]) != pd {
		return 0, "the recorded owner is no thread descriptor"
	}
	b, ok := readStable(mem, pd+pthreadTID, 4)
	if !ok {
		return 0, "the owner's thread descriptor could not be read"
	}
	tid := int(int32(le.Uint32(b)))
	if tid <= 0 {
		return 0, "the owner has exited"
	}
	return checkOwner(tid, tasks)
}

// joinWait: pthread_join waits on the joined thread's tid field
// (&pd->tid, expected value its TID, cleared by the kernel at its exit).
// The edge goes to that thread; Address is its pthread_t.
func joinWait(t *report.Thread, uaddr, val uint64, mem io.ReaderAt, tasks map[int]bool) *report.WaitingFor {
	w := &report.WaitingFor{Kind: report.WaitJoin}
	if uaddr < pthreadTID {
		w.Note = "the joined thread's descriptor was not found"
		return w
	}
	pd := uaddr - pthreadTID
	owner, note := threadOfPthread(pd, mem, tasks)
	switch {
	case owner == 0:
		w.Note = note
		return w
	case uint64(owner) != val&0xffffffff:
		w.Note = "the joined thread's tid changed while read"
		return w
	case owner == t.TID:
		w.Note = "the thread joins itself"
	}
	w.Address = pd
	setOwner(w, owner, "")
	return w
}

// stdioCaller says whether the frames after glibc's private low-level
// lock wait are a stdio function's: the innermost named user frame.
func stdioCaller(frames []report.Frame) lockClass {
	for i := range frames {
		f := &frames[i]
		if f.Kind != "user" || f.Function == "" {
			continue
		}
		if isStdio(normName(f.Function)) {
			return classStdio
		}
		return classNone
	}
	return classNone
}

// isStdio tells glibc's stdio functions (normalized names) that take a
// FILE's lock.
func isStdio(n string) bool {
	switch {
	case strings.HasPrefix(n, "IO_"), strings.HasSuffix(n, "printf_internal"),
		strings.HasSuffix(n, "scanf_internal"), strings.HasSuffix(n, "printf"):
		return true
	}
	switch n {
	case "flockfile", "ftrylockfile", "fputc", "putc", "putchar", "fgetc", "getc", "getchar",
		"getdelim", "getline", "fputs", "puts", "fwrite", "fread", "fgets", "fflush", "fclose",
		"fseek", "fseeko", "fseeko64", "ftell", "ftello", "ftello64", "rewind", "setvbuf",
		"ungetc", "fputws", "fgetws", "fputwc", "fgetwc", "perror", "fileno", "freopen":
		return true
	}
	return false
}

// stdioWait reads the _IO_lock_t a stdio function waits for: its owner is
// a struct pthread pointer, believed only with a lock word and count that
// say the lock is held, and read again after the owner's descriptor.
func stdioWait(uaddr uint64, mem io.ReaderAt, tasks map[int]bool) *report.WaitingFor {
	w := &report.WaitingFor{Kind: report.WaitStdio, Address: uaddr}
	b, ok := readStable(mem, uaddr, sizeofIOLock)
	if !ok {
		w.Note = noteUnreadable
		return w
	}
	le := binary.LittleEndian
	lock, cnt, pd := le.Uint32(b[0:]), le.Uint32(b[4:]), le.Uint64(b[8:])
	switch {
	case lock == 0:
		w.Note = "the stdio lock was free when read"
		return w
	case lock > 2 || cnt == 0 || cnt > maxIOLockCnt || pd == 0:
		w.Note = "the memory is not a stdio lock"
		return w
	}
	owner, note := threadOfPthread(pd, mem, tasks)
	if owner != 0 {
		// Released (and maybe taken by another) while the owner was read?
		if again, ok := readStable(mem, uaddr, sizeofIOLock); !ok || string(again) != string(b) {
			owner, note = 0, "the stdio lock changed while read"
		}
	}
	setOwner(w, owner, note)
	return w
}

// NameLocks names each lock waited for by its symbol where it is a global
// or static (name: the symbolizer's data lookup, "" unknown); a stdio
// lock by its FILE: glibc's locks of the standard streams are
// _IO_stdfile_N_lock.
func NameLocks(p *report.Process, name func(addr uint64) string) {
	names := map[uint64]string{}
	for i := range p.Threads {
		w := p.Threads[i].WaitingFor
		if w == nil || w.Address == 0 || w.Kind == report.WaitJoin {
			continue
		}
		n, ok := names[w.Address]
		if !ok {
			n = name(w.Address)
			names[w.Address] = n
		}
		if w.Kind == report.WaitStdio {
			switch n {
			case "_IO_stdfile_0_lock":
				n = "stdin"
			case "_IO_stdfile_1_lock":
				n = "stdout"
			case "_IO_stdfile_2_lock":
				n = "stderr"
			}
		}
		w.Symbol = n
	}
}
