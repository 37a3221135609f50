package procmaps

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Proc is the root of the proc filesystem; tests may point it elsewhere.
var Proc = "/proc"

func pidPath(pid int, elem ...string) string {
	return Proc + "/" + strconv.Itoa(pid) + "/" + strings.Join(elem, "/")
}

func taskPath(pid, tid int, elem string) string {
	return Proc + "/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/" + elem
}

// maxProcFile bounds how much of a single /proc file is read.
const maxProcFile = 1 << 20

// smallBufs holds the buffers readSmall reads into: a dump reads
// several files per thread, and a fresh 4 KiB buffer each time is a fresh
// page for the kernel to clear and fault in.
var smallBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// readSmall reads a small /proc file and hands its bytes to parse, which
// must not keep them (the buffer is reused).
func readSmall(path string, parse func(b []byte)) error {
	bp := smallBufs.Get().(*[]byte)
	b, err := readFile(path, (*bp)[:0])
	if err == nil {
		parse(b)
	}
	if b != nil && cap(b) <= 64<<10 { // (a rare large file's buffer is let go; a failed read keeps the old one)
		*bp = b[:0]
	}
	smallBufs.Put(bp)
	return err
}

// forLines calls f with each line of b, without its "\n" (nor a "\r"
// before it), as bufio.ScanLines splits them, until f returns false. The
// lines are substrings of one copy of b.
func forLines(b []byte, f func(line string) bool) {
	s := string(b)
	for len(s) > 0 {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if !f(strings.TrimSuffix(line, "\r")) {
			return
		}
	}
}

func readSmallOS(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcFile))
}

// ReadMaps reads and parses /proc/PID/maps.
func ReadMaps(pid int) (Maps, error) { return readMapsFile(pidPath(pid, "maps")) }

func readMapsFile(path string) (Maps, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := ParseMaps(f)
	if err != nil {
		return nil, err
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Start < ms[j].Start })
	return ms, nil
}

// ReadTaskMaps reads the maps through thread tid of pid: the way to a
// process whose main thread has exited (its own maps are then empty).
func ReadTaskMaps(pid, tid int) (Maps, error) { return readMapsFile(taskPath(pid, tid, "maps")) }

// TaskExe is Exe read through thread tid of pid.
func TaskExe(pid, tid int) string {
	p, err := os.Readlink(taskPath(pid, tid, "exe"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(p, " (deleted)")
}

// TaskRootPath is the target's root seen through thread tid.
func TaskRootPath(pid, tid int) string { return taskPath(pid, tid, "root") }

// TaskSet is the set of live process pid's threads now (empty when
// unreadable).
func TaskSet(pid int) map[int]bool {
	tasks := map[int]bool{}
	if tids, err := Tasks(pid); err == nil {
		for _, t := range tids {
			tasks[t] = true
		}
	}
	return tasks
}

// Tasks lists the thread ids of pid, sorted, main thread first.
//
// The directory is read with system calls of its own, not through package
// os, which starts the runtime's poller (an epoll and an eventfd) at its
// first file: a sandboxed child lists its own threads (ptrace.Gather)
// and holds no descriptor beyond its own.
func Tasks(pid int) ([]int, error) {
	path := pidPath(pid, "task")
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var tids []int
	var buf [4096]byte
	for {
		n, err := unix.ReadDirent(fd, buf[:])
		if err != nil {
			return nil, &os.PathError{Op: "readdirent", Path: path, Err: err}
		}
		if n <= 0 {
			break
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if t, err := strconv.Atoi(name); err == nil && t > 0 {
				tids = append(tids, t)
			}
		}
	}
	sort.Ints(tids)
	for i, t := range tids {
		if t == pid && i != 0 {
			copy(tids[1:i+1], tids[:i])
			tids[0] = pid
		}
	}
	return tids, nil
}

// Syscall is the content of /proc/PID/task/TID/syscall.
type Syscall struct {
	Running bool      // "running": the thread is on a CPU
	InCall  bool      // blocked inside system call Nr (otherwise blocked outside one, Nr == -1)
	Nr      int64     // syscall number, -1 when not in a syscall
	Args    [6]uint64 // argument registers
	SP, PC  uint64    // user stack pointer and program counter
}

// ParseSyscall parses the syscall file's text.
func ParseSyscall(b []byte) (Syscall, error) {
	var s Syscall
	f := strings.Fields(string(bytes.TrimSpace(b)))
	if len(f) == 1 && f[0] == "running" {
		s.Running = true
		s.Nr = -1
		return s, nil
	}
	if len(f) != 3 && len(f) != 9 {
		return s, fmt.Errorf("syscall line with %d fields: %w", len(f), ErrFormat)
	}
	nr, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return s, fmt.Errorf("syscall number %q: %w", f[0], ErrFormat)
	}
	s.Nr = nr
	if len(f) == 3 && nr != -1 {
		return s, fmt.Errorf("syscall %d without arguments: %w", nr, ErrFormat)
	}
	hex := func(x string) (uint64, error) {
		v, err := strconv.ParseUint(strings.TrimPrefix(x, "0x"), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("syscall field %q: %w", x, ErrFormat)
		}
		return v, nil
	}
	if len(f) == 9 {
		s.InCall = nr >= 0
		for i := 0; i < 6; i++ {
			if s.Args[i], err = hex(f[1+i]); err != nil {
				return s, err
			}
		}
	}
	if s.SP, err = hex(f[len(f)-2]); err != nil {
		return s, err
	}
	if s.PC, err = hex(f[len(f)-1]); err != nil {
		return s, err
	}
	return s, nil
}

// ReadSyscall reads /proc/PID/task/TID/syscall.
func ReadSyscall(pid, tid int) (Syscall, error) {
	sc, perr := Syscall{Nr: -1}, error(nil)
	if err := readSmall(taskPath(pid, tid, "syscall"), func(b []byte) { sc, perr = ParseSyscall(b) }); err != nil {
		return Syscall{Nr: -1}, err
	}
	return sc, perr
}

// KernelFrame is one line of /proc/PID/task/TID/stack.
type KernelFrame struct {
	Addr     uint64 // 0 when the kernel hides addresses
	Function string // "" when only an address is given
	Offset   uint64
	Size     uint64
}

// ParseKernelStack parses lines like "[<0>] futex_wait_queue+0x7d/0xd0".
func ParseKernelStack(b []byte) []KernelFrame {
	out := make([]KernelFrame, 0, min(bytes.Count(b, []byte{'\n'})+1, 256))
	forLines(b, func(line string) bool {
		line = strings.TrimSpace(line)
		if line == "" {
			return true
		}
		var kf KernelFrame
		if strings.HasPrefix(line, "[<") {
			end := strings.Index(line, ">]")
			if end < 0 {
				return true
			}
			kf.Addr, _ = strconv.ParseUint(line[2:end], 16, 64)
			line = strings.TrimSpace(line[end+2:])
		}
		if i := strings.IndexByte(line, ' '); i >= 0 { // "[module]" suffix
			line = line[:i]
		}
		if plus := strings.LastIndexByte(line, '+'); plus >= 0 {
			offs := line[plus+1:]
			line = line[:plus]
			if sl := strings.IndexByte(offs, '/'); sl >= 0 {
				kf.Size, _ = strconv.ParseUint(strings.TrimPrefix(offs[sl+1:], "0x"), 16, 64)
				offs = offs[:sl]
			}
			kf.Offset, _ = strconv.ParseUint(strings.TrimPrefix(offs, "0x"), 16, 64)
		}
		if strings.HasPrefix(line, "0x") {
			if v, err := strconv.ParseUint(line[2:], 16, 64); err == nil && kf.Addr == 0 {
				kf.Addr = v
			}
			line = ""
		}
		kf.Function = line
		out = append(out, kf)
		return len(out) < 256
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// ReadKernelStack reads /proc/PID/task/TID/stack (root only).
func ReadKernelStack(pid, tid int) ([]KernelFrame, error) {
	var frames []KernelFrame
	err := readSmall(taskPath(pid, tid, "stack"), func(b []byte) { frames = ParseKernelStack(b) })
	return frames, err
}

// Stat holds the fields of /proc/PID/task/TID/stat that stackshot uses.
type Stat struct {
	Comm      string
	State     byte
	PPID      int
	Flags     uint64
	StartTime uint64 // clock ticks after boot
	Processor int
}

// PF_KTHREAD marks kernel threads in Stat.Flags.
const PF_KTHREAD = 0x00200000

// ParseStat parses a stat line; comm may contain spaces and parentheses.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	open := bytes.IndexByte(b, '(')
	close := bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return s, fmt.Errorf("stat line: %w", ErrFormat)
	}
	s.Comm = string(b[open+1 : close])
	// Fields 3 to 39 (f[0] is the state): the ones read here, split in
	// place (a dump parses a stat line per thread).
	var fa [37]string
	f := fieldsInto(fa[:], string(b[close+1:]))
	if len(f) < 20 {
		return s, fmt.Errorf("stat line with %d fields: %w", len(f), ErrFormat)
	}
	if len(f[0]) != 1 {
		return s, fmt.Errorf("stat state %q: %w", f[0], ErrFormat)
	}
	s.State = f[0][0]
	s.PPID, _ = strconv.Atoi(f[1])
	s.Flags, _ = strconv.ParseUint(f[6], 10, 64)
	s.StartTime, _ = strconv.ParseUint(f[19], 10, 64)
	if len(f) > 36 {
		s.Processor, _ = strconv.Atoi(f[36])
	}
	return s, nil
}

// fieldsInto splits s around runs of ASCII white space, as strings.Fields
// does, into dst, up to its length, and returns the fields found.
func fieldsInto(dst []string, s string) []string {
	n := 0
	for n < len(dst) {
		i := 0
		for i < len(s) && asciiSpace(s[i]) {
			i++
		}
		s = s[i:]
		if s == "" {
			break
		}
		j := 0
		for j < len(s) && !asciiSpace(s[j]) {
			j++
		}
		dst[n], s = s[:j], s[j:]
		n++
	}
	return dst[:n]
}

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// ReadStat reads /proc/PID/task/TID/stat.
func ReadStat(pid, tid int) (Stat, error) {
	return readStatFile(taskPath(pid, tid, "stat"))
}

func readStatFile(path string) (Stat, error) {
	var st Stat
	var perr error
	if err := readSmall(path, func(b []byte) { st, perr = ParseStat(b) }); err != nil {
		return Stat{}, err
	}
	return st, perr
}

// ReadArgs reads the first max bytes of a process's command line, its
// arguments joined by spaces (as ps shows them; a kernel thread has none).
// The target writes it: only max bytes are read.
func ReadArgs(pid, max int) (string, error) {
	f, err := os.Open(pidPath(pid, "cmdline"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, max)
	n, err := io.ReadFull(f, b)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return "", err
	}
	b = bytes.TrimRight(b[:n], "\x00")
	for i := range b {
		if b[i] == 0 {
			b[i] = ' '
		}
	}
	return string(b), nil
}

// ReadProcStat reads /proc/PID/stat.
func ReadProcStat(pid int) (Stat, error) {
	return readStatFile(pidPath(pid, "stat"))
}

// Identity tells a process apart from a later one that is given its PID:
// a PID is reused, a (PID, start time) pair is not.
type Identity struct {
	PID       int
	StartTime uint64 // clock ticks after boot (field 22 of /proc/PID/stat)
}

// ReadIdentity reads pid's identity now. Compare two reads to know whether
// they saw the same process.
func ReadIdentity(pid int) (Identity, error) {
	st, err := ReadProcStat(pid)
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, StartTime: st.StartTime}, nil
}

// SchedStat is /proc/PID/task/TID/schedstat: time on CPU, time waiting and
// the number of times the thread was scheduled. Any change between two
// reads means the thread ran.
type SchedStat struct {
	RunNS, WaitNS, Slices uint64
}

// ReadSchedStat reads /proc/PID/task/TID/schedstat.
func ReadSchedStat(pid, tid int) (SchedStat, error) {
	var ss SchedStat
	var perr error
	if err := readSmall(taskPath(pid, tid, "schedstat"), func(b []byte) { ss, perr = parseSchedStat(b) }); err != nil {
		return SchedStat{}, err
	}
	return ss, perr
}

func parseSchedStat(b []byte) (SchedStat, error) {
	var s SchedStat
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return s, fmt.Errorf("schedstat: %w", ErrFormat)
	}
	s.RunNS, _ = strconv.ParseUint(f[0], 10, 64)
	s.WaitNS, _ = strconv.ParseUint(f[1], 10, 64)
	s.Slices, _ = strconv.ParseUint(f[2], 10, 64)
	return s, nil
}

// Status holds the fields of /proc/PID/status that stackshot uses.
type Status struct {
	Name      string
	State     byte
	Tgid      int
	PPid      int
	TracerPid int
	UID       int // real uid
	// UIDs and GIDs are the real, effective, saved and filesystem ids.
	UIDs, GIDs [4]int
	VolCtx     uint64
	NonVolCtx  uint64
	// NSpid is the task's id in each PID namespace it is in, from the
	// one /proc was mounted in to its own (at most 33 levels, the
	// kernel's limit); nil when the kernel does not say.
	NSpid []int
}

// ParseStatus parses /proc/PID/status.
func ParseStatus(b []byte) Status {
	var s Status
	forLines(b, func(line string) bool {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return true
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			s.Name = v
		case "State":
			if v != "" {
				s.State = v[0]
			}
		case "Tgid":
			s.Tgid, _ = strconv.Atoi(v)
		case "PPid":
			s.PPid, _ = strconv.Atoi(v)
		case "TracerPid":
			s.TracerPid, _ = strconv.Atoi(v)
		case "Uid":
			if f := strings.Fields(v); len(f) > 0 {
				s.UID, _ = strconv.Atoi(f[0])
				for i := 0; i < len(f) && i < len(s.UIDs); i++ {
					s.UIDs[i], _ = strconv.Atoi(f[i])
				}
			}
		case "Gid":
			for i, f := range strings.Fields(v) {
				if i < len(s.GIDs) {
					s.GIDs[i], _ = strconv.Atoi(f)
				}
			}
		case "voluntary_ctxt_switches":
			s.VolCtx, _ = strconv.ParseUint(v, 10, 64)
		case "nonvoluntary_ctxt_switches":
			s.NonVolCtx, _ = strconv.ParseUint(v, 10, 64)
		case "NSpid":
			s.NSpid = parseNSpid(v)
		}
		return true
	})
	return s
}

// maxPIDNSLevels bounds an NSpid line (MAX_PID_NS_LEVEL is 32, plus the
// root namespace).
const maxPIDNSLevels = 33

func parseNSpid(v string) []int {
	f := strings.Fields(v)
	if len(f) == 0 || len(f) > maxPIDNSLevels {
		return nil
	}
	out := make([]int, len(f))
	for i := range f {
		n, err := strconv.Atoi(f[i])
		if err != nil || n <= 0 {
			return nil
		}
		out[i] = n
	}
	return out
}

// ReadStatus reads /proc/PID/status.
func ReadStatus(pid int) (Status, error) {
	var st Status
	err := readSmall(pidPath(pid, "status"), func(b []byte) { st = ParseStatus(b) })
	return st, err
}

// Exe returns the target's executable path as /proc shows it.
func Exe(pid int) string {
	p, err := os.Readlink(pidPath(pid, "exe"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(p, " (deleted)")
}

// MapFilesPath is the /proc/PID/map_files entry for a mapping.
func MapFilesPath(pid int, m *Mapping) string {
	return fmt.Sprintf("%s/%d/map_files/%x-%x", Proc, pid, m.Start, m.End)
}

// OpenMapped opens the file of mapping m of process pid through its
// map_files entry, a regular file only; its size with it.
func OpenMapped(pid int, m *Mapping) (*os.File, int64, error) {
	f, err := os.Open(MapFilesPath(pid, m))
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", f.Name())
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// RootPath is the target's view of the filesystem root.
func RootPath(pid int) string { return pidPath(pid, "root") }

// ErrNoProcess means the process does not exist (or is gone). It is the
// project's one such sentinel: ptrace returns it too.
var ErrNoProcess = errors.New("no such process")

// MaxAuxv bounds /proc/PID/auxv (the kernel's own is under 1 KiB).
const MaxAuxv = 4096

// ReadAuxv reads /proc/PID/auxv, the process's ELF auxiliary vector.
func ReadAuxv(pid int) ([]byte, error) {
	var auxv []byte
	err := readSmall(pidPath(pid, "auxv"), func(b []byte) {
		auxv = append([]byte(nil), b[:min(len(b), MaxAuxv)]...)
	})
	return auxv, err
}
