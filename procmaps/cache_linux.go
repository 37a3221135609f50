//go:build linux

package procmaps

import (
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
type TaskCache struct {
	mu    sync.Mutex
	tasks map[[2]int]*taskFiles
}

type taskFiles struct {
	fds [numTaskFiles]int // -1: not open
	buf *[]byte           // from smallBufs
}

// NewTaskCache returns an empty cache; Close releases it.
func NewTaskCache() *TaskCache { return &TaskCache{tasks: map[[2]int]*taskFiles{}} }

func (c *TaskCache) files(pid, tid int) *taskFiles {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]int{pid, tid}
	tf := c.tasks[k]
	if tf == nil {
		tf = &taskFiles{fds: [numTaskFiles]int{-1, -1, -1, -1}}
		c.tasks[k] = tf
	}
	return tf
}

// read preads one of a thread's files, opening it on first use. The
// returned bytes are valid until the next read of the same thread.
func (c *TaskCache) read(pid, tid, which int) ([]byte, error) {
	tf := c.files(pid, tid)
	if tf.fds[which] < 0 {
		fd, err := tf.open(pid, tid, which)
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

func (tf *taskFiles) open(pid, tid, which int) (int, error) {
	path := taskPath(pid, tid, taskFileNames[which])
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
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
}

// Forget closes one thread's files: a one-shot capture is done with a
// thread once it is observed, and holding four descriptors for each of
// thousands of threads would starve the rest of the process.
func (c *TaskCache) Forget(pid, tid int) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]int{pid, tid}
	if tf := c.tasks[k]; tf != nil {
		tf.close()
		delete(c.tasks, k)
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
