package resolve

import "encoding/binary"

// The standard streams' locks are statics (_IO_stdfile_N_lock), named
// only by libc's .symtab, which Debian ships apart (libc6-dbg). Without
// it a lock is still the standard stream's when it is the one that
// stream's FILE points at: the FILEs are in libc's .dynsym
// (_IO_2_1_stdout_, ...), as are the pointers the program uses (stdout,
// ...), and a FILE records its lock's address (_IO_FILE._lock, at 0x88
// in glibc's LP64 layout: x86-64 and arm64 alike). The lock is named as
// the .symtab would name it, for NameLocks to say "stdout".
const ioFileLock = 0x88

var stdStreams = [...]struct{ file, ptr, lock string }{
	{"_IO_2_1_stdin_", "stdin", "_IO_stdfile_0_lock"},
	{"_IO_2_1_stdout_", "stdout", "_IO_stdfile_1_lock"},
	{"_IO_2_1_stderr_", "stderr", "_IO_stdfile_2_lock"},
}

// stdioLockName is the .symtab name of the standard stream's lock at addr
// in module e's space, or "" when addr is none of theirs (or the memory
// cannot be read).
func (s *Space) stdioLockName(e *modEntry, addr uint64) string {
	if s.mem == nil {
		return ""
	}
	if _, ok := e.mod.DataAddr("_IO_2_1_stdout_"); !ok {
		return "" // not libc
	}
	var b [8]byte
	word := func(at uint64) (uint64, bool) {
		if n, err := s.mem.ReadAt(b[:], int64(at)); n != len(b) || err != nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	for _, st := range stdStreams {
		var files []uint64
		if v, ok := e.mod.DataAddr(st.file); ok {
			files = append(files, v+e.bias)
		}
		if v, ok := e.mod.DataAddr(st.ptr); ok {
			if f, ok := word(v + e.bias); ok && f != 0 && f < 1<<63 {
				files = append(files, f)
			}
		}
		for _, f := range files {
			if l, ok := word(f + ioFileLock); ok && l == addr {
				return st.lock
			}
		}
	}
	return ""
}
