//go:build linux

package procmaps

import (
	"strconv"
	"sync"
	"syscall"
)

// Task files kept open by a TaskCache.
const (
	fileStat = iota
	fileSyscall
	fileSchedStat
	fileStack
	numTaskFiles
)

var taskFileNames = [numTaskFiles]string{"stat", "syscall", "schedstat", "stack"}

// TaskCache keeps each thread's /proc files open between reads: a sampler
// reads the same files every tick, and a pread of an open file costs one
// system call where open+read+close costs three. A nil *TaskCache reads
// the files afresh every time.
//
// It also keeps each process's task directory open, and opens a thread's
// files relative to it ("TID/stat"): the kernel then walks one directory
// and one file per open instead of /proc, the pid and task as well (a
// 512-thread dump opens 2,048 of these files).
type TaskCache struct {
	mu    sync.Mutex
	tasks map[[2]int]*taskFiles
	dirs  map[int]int // pid -> its open /proc/PID/task (-1: could not open)
}

type taskFiles struct {
	fds [numTaskFiles]int // -1: not open
	buf *[]byte           // from smallBufs
}

// NewTaskCache returns an empty cache; Close releases it.
func NewTaskCache() *TaskCache {
	return &TaskCache{tasks: map[[2]int]*taskFiles{}, dirs: map[int]int{}}
}

// files is a thread's open files, and its process's task directory (-1:
// none, open by full path).
func (c *TaskCache) files(pid, tid int) (tf *taskFiles, dir int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]int{pid, tid}
	tf = c.tasks[k]
	if tf == nil {
		tf = &taskFiles{fds: [numTaskFiles]int{-1, -1, -1, -1}}
		c.tasks[k] = tf
	}
	dir, ok := c.dirs[pid]
	if !ok {
		dir = openDir(Proc + "/" + strconv.Itoa(pid) + "/task")
		c.dirs[pid] = dir
	}
	return tf, dir
}

// openDir opens a directory only to open files relative to it (-1: it
// could not be opened; the files are then opened by full path, which
// says why they cannot be read).
func openDir(path string) int {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|oPath, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|oPath, 0)
	}
	if err != nil {
		return -1
	}
	return fd
}

// O_PATH and AT_FDCWD (the syscall package does not name them).
const (
	oPath   = 0x200000
	atFDCWD = -100
)

// read preads one of a thread's files, opening it on first use. The
// returned bytes are valid until the next read of the same thread.
func (c *TaskCache) read(pid, tid, which int) ([]byte, error) {
	tf, dir := c.files(pid, tid)
	if tf.fds[which] < 0 {
		fd, err := tf.open(dir, pid, tid, which)
		if err != nil {
			if err == syscall.EMFILE || err == syscall.ENFILE {
				return readFile(taskPath(pid, tid, taskFileNames[which]), nil) // out of descriptors: no caching
			}
			return nil, &pathErr{taskPath(pid, tid, taskFileNames[which]), err}
		}
		tf.fds[which] = fd
	}
	if tf.buf == nil {
		tf.buf = smallBufs.Get().(*[]byte)
	}
	if cap(*tf.buf) < 4096 { // (readSmall may have put back an empty one)
		*tf.buf = make([]byte, 0, 4096)
	}
	buf := (*tf.buf)[:cap(*tf.buf)]
	for {
		// One pread reads the whole of these one-record files: a short
		// count is the end.
		n, err := syscall.Pread(tf.fds[which], buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			syscall.Close(tf.fds[which])
			tf.fds[which] = -1
			return nil, &pathErr{taskPath(pid, tid, taskFileNames[which]), err}
		}
		if n == len(buf) && len(buf) < maxProcFile {
			buf = make([]byte, 2*len(buf))
			*tf.buf = buf[:0]
			continue
		}
		return buf[:n], nil
	}
}

// open opens one of a thread's files, relative to its task directory dir
// when there is one.
func (tf *taskFiles) open(dir, pid, tid, which int) (int, error) {
	var path string
	if dir >= 0 {
		path = strconv.Itoa(tid) + "/" + taskFileNames[which]
	} else {
		dir, path = atFDCWD, taskPath(pid, tid, taskFileNames[which])
	}
	fd, err := syscall.Openat(dir, path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Openat(dir, path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	return fd, err
}

type pathErr struct {
	path string
	err  error
}

func (e *pathErr) Error() string { return "read " + e.path + ": " + e.err.Error() }
func (e *pathErr) Unwrap() error { return e.err }

// ReadStat reads /proc/PID/task/TID/stat.
func (c *TaskCache) ReadStat(pid, tid int) (Stat, error) {
	if c == nil {
		return ReadStat(pid, tid)
	}
	b, err := c.read(pid, tid, fileStat)
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ReadSyscall reads /proc/PID/task/TID/syscall.
func (c *TaskCache) ReadSyscall(pid, tid int) (Syscall, error) {
	if c == nil {
		return ReadSyscall(pid, tid)
	}
	b, err := c.read(pid, tid, fileSyscall)
	if err != nil {
		return Syscall{Nr: -1}, err
	}
	return ParseSyscall(b)
}

// ReadSchedStat reads /proc/PID/task/TID/schedstat.
func (c *TaskCache) ReadSchedStat(pid, tid int) (SchedStat, error) {
	if c == nil {
		return ReadSchedStat(pid, tid)
	}
	b, err := c.read(pid, tid, fileSchedStat)
	if err != nil {
		return SchedStat{}, err
	}
	return parseSchedStat(b)
}

// ReadKernelStack reads /proc/PID/task/TID/stack.
func (c *TaskCache) ReadKernelStack(pid, tid int) ([]KernelFrame, error) {
	if c == nil {
		return ReadKernelStack(pid, tid)
	}
	b, err := c.read(pid, tid, fileStack)
	if err != nil {
		return nil, err
	}
	return ParseKernelStack(b), nil
}

// Retain closes the files of pid's threads that are not in tids (they
// exited).
func (c *TaskCache) Retain(pid int, tids map[int]bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, tf := range c.tasks {
		if k[0] == pid && !tids[k[1]] {
			tf.close()
			delete(c.tasks, k)
		}
	}
	if len(tids) == 0 {
		c.closeDir(pid)
	}
}

// closeDir closes pid's task directory (under c.mu).
func (c *TaskCache) closeDir(pid int) {
	if fd, ok := c.dirs[pid]; ok {
		if fd >= 0 {
			syscall.Close(fd)
		}
		delete(c.dirs, pid)
	}
}

// Forget closes one thread's files: a one-shot capture is done with a
// thread once it is observed, and holding four descriptors for each of
// thousands of threads would starve the rest of the process.
func (c *TaskCache) Forget(pid, tid int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	k := [2]int{pid, tid}
	tf := c.tasks[k]
	delete(c.tasks, k)
	c.mu.Unlock()
	if tf != nil {
		// Outside the lock: closing four of these files costs about as
		// much as reading them, and the other observers wait for the
		// lock to open theirs.
		tf.close()
	}
}

// Close closes every file.
func (c *TaskCache) Close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, tf := range c.tasks {
		tf.close()
		delete(c.tasks, k)
	}
	for pid := range c.dirs {
		c.closeDir(pid)
	}
}

func (tf *taskFiles) close() {
	for i, fd := range tf.fds {
		if fd >= 0 {
			syscall.Close(fd)
			tf.fds[i] = -1
		}
	}
	if tf.buf != nil {
		if cap(*tf.buf) <= 64<<10 { // (a rare large file's buffer is let go)
			smallBufs.Put(tf.buf)
		}
		tf.buf = nil
	}
}
