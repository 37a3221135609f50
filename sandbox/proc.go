//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/ptrace"
)

// proc is the child's process, started by startProc: os/exec is not used,
// as its first start in a process probes pidfd support by forking a process
// of its own (a start took 0.44 ms against 0.2 ms without, measured alone;
// a whole dump's wall time showed no difference beyond the noise).
//
// The process is reaped only once it has exited, and signalled only before
// that (under mu): its pid cannot name another process while stackshot may
// signal it, or while stackshot sets its CPU mask (ptrace.Companion).
type proc struct {
	pid    int
	mu     sync.Mutex
	reaped bool
	status syscall.WaitStatus
	done   chan struct{} // closed once reaped and its stderr read to the end
}

// childIDs are the unprivileged user and group a child of root becomes.
type childIDs struct{ uid, gid uint32 }

// startProc starts stackshot's own executable as the child, with sock as
// its descriptor 3, nothing of the operator's environment, and its stderr
// kept in stderr. A child of root is given user (nil: it stays
// stackshot's user), which it becomes itself, first thing (becomeUser):
// started as that user, it would be dumpable until its lockdown, and any
// process of that user (nobody's, on most machines) could attach to it in
// that time and receive what the parent hands it.
func startProc(sock *os.File, user *childIDs, stderr io.Writer) (*proc, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// (Fd puts the descriptors in blocking mode: both are the child's
	// alone, and closed here once it has started.)
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   childEnv(),
		Files: []uintptr{null.Fd(), null.Fd(), w.Fd(), sock.Fd()},
		Sys: &syscall.SysProcAttr{
			Pdeathsig: syscall.SIGKILL,
			Setsid:    true,
		},
	}
	args := []string{"stackshot", ChildCommand}
	if user != nil {
		// The group and the supplementary groups are changed before the
		// exec, where it costs one system call each (in the child, Go
		// makes every thread make each: becomeUser); the user is
		// changed by the child itself, which leaves it not dumpable.
		attr.Sys.Credential = &syscall.Credential{Uid: 0, Gid: user.gid, Groups: []uint32{}}
		args = append(args, strconv.FormatUint(uint64(user.uid), 10), strconv.FormatUint(uint64(user.gid), 10),
			strconv.Itoa(os.Getpid()))
	}
	// The child's parent-death signal is sent when the thread that started
	// it exits, not stackshot (prctl PR_SET_PDEATHSIG), and stackshot's
	// tracer threads exit on purpose: the child is started from a
	// goroutine that holds its thread until the child has exited, and
	// reaps it.
	p := &proc{done: make(chan struct{})}
	started := make(chan error, 1)
	copied := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pid, err := syscall.ForkExec("/proc/self/fd/"+fmt.Sprint(exeFile.Fd()), args, attr)
		if err != nil {
			started <- err
			return
		}
		p.pid = pid
		// The child's threads keep off the CPUs of the target's running
		// threads with the parent's (ptrace.Companion), until it has
		// exited: it is reaped only after that.
		release := ptrace.Companion(pid)
		started <- nil
		waitExited(pid)
		release()
		p.mu.Lock()
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
		p.status, p.reaped = ws, true
		p.mu.Unlock()
		<-copied
		close(p.done)
	}()
	err = <-started
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	if straceDir != "" {
		straceChild(p.pid)
	}
	go func() {
		io.Copy(stderr, r)
		r.Close()
		close(copied)
	}()
	return p, nil
}

// becomeUser makes the child, started by root, the unprivileged user its
// arguments name (uid, gid, and the parent's pid: nothing to do without
// them), before it reads anything from its parent. Until then it runs as
// root, which no unprivileged process may trace; the change leaves it not
// dumpable (unless fs.suid_dumpable says otherwise: then it is made so
// here) and clears its parent-death signal, set again here (the parent may
// have ended meanwhile: then it exits).
func becomeUser(args []string) error {
	if len(args) != 3 {
		return nil
	}
	uid, err1 := strconv.Atoi(args[0])
	gid, err2 := strconv.Atoi(args[1])
	parent, err3 := strconv.Atoi(args[2])
	if err1 != nil || err2 != nil || err3 != nil || uid <= 0 || gid <= 0 {
		return fmt.Errorf("bad user %q", args)
	}
	pauseForTest("STACKSHOT_TEST_CHILD_PAUSE_ROOT")
	restore := ptrace.Gather()
	err := changeUser(uid, gid)
	restore()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
	}
	if os.Getppid() != parent {
		return errors.New("the parent has ended")
	}
	pauseForTest("STACKSHOT_TEST_CHILD_PAUSE_USER")
	return nil
}

// changeUser makes every thread of the process uid, once it has checked
// that the parent gave it group gid and no other before its exec
// (startProc: there one system call each, where Go makes every thread of
// the child make each). Go applies the change to every thread, signalling
// each in turn and waiting for it: the caller gathers them on one CPU
// first (ptrace.Gather says why).
func changeUser(uid, gid int) error {
	groups, err := unix.Getgroups()
	if r, e, s := unix.Getresgid(); err != nil || len(groups) > 0 || r != gid || e != gid || s != gid {
		return fmt.Errorf("started with groups %v and gids %d %d %d, want only %d (%v)", groups, r, e, s, gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}
	return nil
}

// pauseForTest sleeps as long as the environment variable env says (set
// by the tests only, through TestEnv: the child's environment is the
// parent's choice).
func pauseForTest(env string) {
	if d, err := time.ParseDuration(os.Getenv(env)); err == nil {
		time.Sleep(d)
	}
}

// waitExited returns once child pid has exited, without reaping it.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			return
		}
	}
}

// kill sends the child SIGKILL, unless it has been reaped.
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		unix.Kill(p.pid, unix.SIGKILL)
	}
}

// why describes how a reaped child ended ("" for a clean exit): killed
// says it was killed by stackshot.
func (p *proc) why(cpuSeconds uint64, killed bool) string {
	ws := p.status
	switch {
	case ws.Signaled() && !killed && ws.Signal() == syscall.SIGKILL:
		return fmt.Sprintf("killed by the kernel: its CPU time limit (%d s) or the OOM killer", cpuSeconds)
	case ws.Signaled() && !killed:
		return fmt.Sprintf("signal: %v", ws.Signal())
	case ws.Exited() && ws.ExitStatus() != 0:
		return fmt.Sprintf("exit %d", ws.ExitStatus())
	}
	return ""
}
