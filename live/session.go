//go:build linux

// Package live reads live processes: it captures each target (in a
// sandboxed child where one is needed), unwinds, symbolizes and diagnoses
// the capture, and checks the pid still names the process read. Its
// errors are in the contract's words; what it has to say goes through
// Options.Say.
package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"stackshot/capfile"
	"stackshot/debuginfod"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
	"stackshot/symtab"
)

// Options are what a session does, from the command's flags.
type Options struct {
	// Capture: Mode, Consistent, StackBytes, Kernel and TIDs (the
	// deadline and the cancel channel are the session's).
	Capture ptrace.Options
	Resolve resolve.Options
	// Sandbox configures the children that parse what a target
	// controls; NoSandbox keeps that in-process.
	Sandbox   sandbox.Config
	NoSandbox bool
	// Started and Timeout bound the command (--timeout counts from
	// Started); Timeout also bounds each round's captures.
	Started    time.Time
	Timeout    time.Duration
	Quiet      bool // no warnings (errors are still said)
	Goroutines bool // list the goroutines of Go processes
	NoPython   bool // leave out the Python frames of CPython programs
	// Group and NoGroup fold threads (and goroutines) with the same
	// stack, or never; neither: past groupAuto threads.
	Group, NoGroup bool
	// Count snapshots, Interval apart (Dump); 0 or 1: one.
	Count      int
	Interval   time.Duration
	Debuginfod *debuginfod.Client // paused while threads are stopped; nil: none
	// Say writes one line to the user (stderr); the caller prefixes and
	// escapes it.
	Say func(msg string)
}

// ErrInterrupted is a command ended by a signal: every thread was
// detached, and nothing is to be written.
var ErrInterrupted = errors.New("interrupted (every thread was detached; nothing written)")

// Session holds what a command shares across its targets.
type Session struct {
	o      Options
	sym    *symtab.Symbolizer
	res    *resolve.Resolver
	cancel <-chan struct{}
	warned map[string]bool
	boxes  map[int]*sandbox.Child // sandboxed children, by target (sandbox.go)
	// launching are children being started (sandbox.go).
	launching map[int]*sandbox.Launching
	// stopSignals ends CatchSignals (nil: not catching)
	stopSignals func()
	// beforeTrace starts catching (CatchSignalsOnTrace), nil: none to start
	beforeTrace func()
	// what a child's symbolizer could not do (Expired, BudgetExceeded)
	boxExpired, boxBudget bool
}

// New starts a session that symbolizes with sym.
func New(sym *symtab.Symbolizer, o Options) *Session {
	if o.Say == nil {
		o.Say = func(string) {}
	}
	o.Resolve.Live = true
	return &Session{o: o, sym: sym, warned: map[string]bool{}, cancel: make(chan struct{}),
		res: resolve.NewResolver(sym, o.Resolve)}
}

// Resolver is the session's resolver (record samples with it).
func (s *Session) Resolver() *resolve.Resolver { return s.res }

// Expired reports whether some frames were left unresolved at the
// deadline, in-process or in a child.
func (s *Session) Expired() bool {
	return s.sym.Expired() || s.boxExpired || s.anyBox((*sandbox.Child).Expired)
}

// BudgetExceeded reports whether some module's symbols exceeded the
// budget, in-process or in a child.
func (s *Session) BudgetExceeded() bool {
	return s.sym.BudgetExceeded() || s.boxBudget || s.anyBox((*sandbox.Child).BudgetExceeded)
}

// CatchSignals makes SIGINT/SIGTERM end the command cleanly, until Close:
// captures in flight detach every thread before they return.
func (s *Session) CatchSignals() {
	ctx, stop := signal.NotifyContext(context.Background(), caughtSignals...)
	s.cancel, s.stopSignals = ctx.Done(), stop
}

// caughtSignals are the signals a session catches.
var caughtSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE}

// CatchSignalsOnTrace is CatchSignals from the first capture that makes a
// ptrace call on (ptrace.Options.BeforeTrace), until Close. A dump whose
// threads are all read without a stop never catches: catching costs a
// locked OS thread and hand-offs to it (about 5% of a small dump), and
// before a thread is traced a signal ending the command the usual way
// leaves nothing to detach (the target is only read through /proc and
// process_vm_readv; a sandboxed child dies with its parent).
func (s *Session) CatchSignalsOnTrace() {
	cancel, done := make(chan struct{}), make(chan struct{})
	sig := make(chan os.Signal, 1)
	var once sync.Once
	s.cancel = cancel
	s.beforeTrace = func() {
		once.Do(func() {
			signal.Notify(sig, caughtSignals...)
			go func() {
				select {
				case <-sig:
					close(cancel)
				case <-done:
				}
			}()
		})
	}
	s.stopSignals = func() {
		once.Do(func() {}) // (nothing starts catching after Close)
		signal.Stop(sig)
		close(done)
	}
}

// Interrupted reports whether a signal ended the session.
func (s *Session) Interrupted() bool {
	select {
	case <-s.cancel:
		return true
	default:
		return false
	}
}

// Warn says a warning once, unless Quiet.
func (s *Session) Warn(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); !s.o.Quiet && !s.warned[msg] {
		s.warned[msg] = true
		s.o.Say(msg)
	}
}

// CaptureOptions are the capture's options, with deadline.
func (s *Session) CaptureOptions(deadline time.Time) ptrace.Options {
	o := s.o.Capture
	o.Deadline, o.Cancel, o.BeforeTrace = deadline, s.cancel, s.beforeTrace
	return o
}

// UseMode sets the mode of later captures (record's first capture stops no
// thread when perf events sample the running ones).
func (s *Session) UseMode(m ptrace.Mode) { s.o.Capture.Mode = m }

// capture takes one raw snapshot of pid, with build ids and the vdso.
func (s *Session) capture(pid int, deadline time.Time) (*ptrace.Process, error) {
	resume := s.o.Debuginfod.Pause() // (fetches wait for the threads to run again)
	p, err := s.captureLive(pid, s.CaptureOptions(deadline))
	resume()
	if err != nil {
		return nil, ExplainCaptureError(pid, err)
	}
	s.noteProcess(p)
	return p, nil
}

// dumpGCPercent is a dump's GOGC, and its children's.
const dumpGCPercent = 400

// Dump reads each pid (Count snapshots of each when Count > 1) and
// returns the reports of those it could read, saying why the others could
// not; failed counts them. Interrupted: ErrInterrupted.
func (s *Session) Dump(pids []int) (procs []*report.Process, failed int, err error) {
	// A dump is short-lived: collecting at 4x the live heap instead of 2x
	// spares a 512-thread dump its collections (7 % of its CPU) for 1 MB
	// more peak RSS (BenchmarkDumpVsEuStack/threads-512). Its sandboxed
	// children too: 1.4 ms of a sandboxed 512-thread dump's 36.
	debug.SetGCPercent(dumpGCPercent)
	s.o.Sandbox.GCPercent = dumpGCPercent
	if s.o.Count > 1 {
		return s.dumpSnapshots(pids)
	}
	failed, err = s.captureEach(pids, time.Now().Add(s.o.Timeout), func(p *ptrace.Process) (func(), error) {
		rp, err := s.resolveLive(p)
		return func() { procs = append(procs, rp) }, err
	})
	return procs, failed, err
}

// captureEach captures each pid in turn and hands the capture to use,
// saying why a pid could not be read (or lacks the threads asked for, or
// was replaced meanwhile). use reads the live process and returns what to
// keep once the pid is known to still name the process captured. It
// returns how many could not; interrupted, ErrInterrupted (every thread
// was detached, nothing is written).
func (s *Session) captureEach(pids []int, deadline time.Time, use func(*ptrace.Process) (keep func(), err error)) (failed int, err error) {
	for _, pid := range pids {
		if s.Interrupted() {
			break
		}
		id, _ := procmaps.ReadIdentity(pid) // a failure shows in the capture
		err := s.captureOne(pid, deadline, id, use)
		if err == ErrInterrupted {
			break
		}
		if err != nil {
			if err != errSaid {
				s.o.Say(err.Error())
			}
			failed++
		}
	}
	if s.Interrupted() {
		return failed, ErrInterrupted
	}
	return failed, nil
}

// errSaid is a failure already said (by ptrace.Process.Keep).
var errSaid = errors.New("(said)")

// captureOne captures pid and hands the capture to use (see captureEach);
// id, read before, is the process pid is to name (PID 0: unknown): checked
// after the capture, before use parses anything of it, and after use. Its
// error says why nothing was kept (a *replacedError: pid names another
// process); ErrInterrupted, a signal ended it.
func (s *Session) captureOne(pid int, deadline time.Time, id procmaps.Identity, use func(*ptrace.Process) (keep func(), err error)) error {
	p, err := s.Capture(pid, deadline)
	if s.Interrupted() {
		return ErrInterrupted // (what the capture met is the interrupt's doing)
	}
	if err != nil {
		return err
	}
	if !p.Keep(s.o.Capture.TIDs, s.o.Say) {
		return errSaid
	}
	if afterCaptureHook != nil {
		afterCaptureHook(pid)
	}
	if err := sameProcess(id); err != nil {
		return err // (none of it parsed, in-process or in a child)
	}
	keep, err := use(p)
	if err == nil {
		err = sameProcess(id)
	}
	if err != nil {
		return err
	}
	keep()
	return nil
}

// CaptureOnce captures each of pids once and hands each capture to use
// (record's first captures). The first failure ends it, explained; an
// interrupt, ErrInterrupted.
func (s *Session) CaptureOnce(pids []int, deadline time.Time, use func(*ptrace.Process) error) error {
	for _, pid := range pids {
		p, err := s.Capture(pid, deadline)
		if s.Interrupted() {
			return ErrInterrupted // (what the capture met is the interrupt's doing)
		}
		if err != nil {
			return err // (the capture's message explains)
		}
		if err := use(p); err != nil {
			return ExplainCaptureError(pid, err)
		}
	}
	return nil
}

// resolveLive unwinds, symbolizes and diagnoses a live capture.
func (s *Session) resolveLive(p *ptrace.Process) (*report.Process, error) {
	var rp *report.Process
	var tasks map[int]bool
	if child := s.sandboxFor(p.PID); child != nil {
		// The child goes on, right after its answer, with the lock
		// owners and the goroutines of what it resolved (no round trip
		// each, no report sent back down), then hands over its cache
		// entries (this is a dump's last request of it).
		// The target's tasks are listed once the request has gone
		// (Then.Tasks), while the child resolves. Not for a target in
		// another PID namespace: its lock owners are read in its own
		// ids (pidns.go), asked of the child after.
		list := func() map[int]bool {
			tasks = procmaps.TaskSet(p.PID)
			return tasks
		}
		rp = s.resolveBoxed(child, p, sandbox.Then{Locks: samePIDNamespace(p.PID), Tasks: list, Goroutines: s.o.Goroutines, Flush: true})
		if tasks == nil {
			list() // (the child failed before)
		}
	} else {
		// (listed beside the resolve: 0.7 ms for 512 threads)
		listed := make(chan map[int]bool, 1)
		go func() { listed <- procmaps.TaskSet(p.PID) }()
		var err error
		rp, err = s.resolveCaptured(p)
		tasks = <-listed
		if err != nil {
			return nil, err
		}
	}
	py := s.addPython(p, rp)
	s.diagnose(rp, p, tasks)
	py.nameLockWaits(rp, tasks)
	s.addGoroutines(p, rp, s.o.Started.Add(s.o.Timeout))
	rp.Cmdline, _ = procmaps.ReadArgs(p.MemPID(), report.MaxCmdline) // (its threads run again)
	if len(s.o.Capture.TIDs) > 0 && len(tasks) > len(rp.Threads) {
		rp.AllThreads = len(tasks)
	}
	return rp, nil
}

// noteProcess turns per-thread conditions into one-line warnings.
func (s *Session) noteProcess(p *ptrace.Process) {
	denied := 0
	for _, th := range p.Threads {
		if s.o.Capture.Kernel && th.KernelOutcome == ptrace.KernelDenied {
			s.Warn("kernel stacks are not readable (%s; showing user frames only)", map[bool]string{
				false: "they need root or CAP_SYS_ADMIN", true: "refused although stackshot runs as root: a container or a security module hides them"}[os.Geteuid() == 0])
		}
		if th.Outcome == ptrace.OutcomeNotPermitted {
			denied++
		}
	}
	if denied > 0 {
		s.Warn("%s", permissionHelp(p.PID))
	}
}

// ExplainCaptureError puts a capture's error in the contract's words:
// what could not be read, why, and what to do.
func ExplainCaptureError(pid int, err error) error {
	switch {
	case errors.Is(err, ptrace.ErrNoProcess):
		if strings.Contains(err.Error(), "is a thread of") {
			return fmt.Errorf("cannot read process %d (%v; give the process id)", pid, err)
		}
		return fmt.Errorf("cannot read process %d (no such process; check the pid with ps)", pid)
	case errors.Is(err, ptrace.ErrPermission), errors.Is(err, os.ErrPermission):
		return fmt.Errorf("cannot read process %d (permission denied; %s)", pid, permissionHelp(pid))
	case errors.Is(err, syscall.ESRCH), errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cannot read process %d (it exited while being read; nothing to show)", pid)
	}
	return fmt.Errorf("cannot read process %d (%v)", pid, err)
}

// notDumpable reports whether process pid, whose ids are the caller's, is
// not dumpable: the kernel then gives the files in its /proc/PID (not the
// directory itself) to root of its user namespace, whoever runs it.
func notDumpable(pid int) bool {
	var st syscall.Stat_t
	return syscall.Stat(fmt.Sprintf("/proc/%d/mem", pid), &st) == nil && int(st.Uid) != os.Getuid()
}

// permissionHelp explains why ptrace may be refused.
func permissionHelp(pid int) string {
	var why []string
	if st, err := procmaps.ReadStatus(pid); err == nil {
		if st.TracerPid != 0 {
			why = append(why, fmt.Sprintf("already traced by pid %d (%s): detach that debugger first", st.TracerPid, procmaps.Exe(st.TracerPid)))
		}
		if uid := os.Getuid(); uid != 0 && st.UID != uid {
			// As root, ownership is no reason.
			why = append(why, fmt.Sprintf("it belongs to uid %d: run as that user or as root", st.UID))
		} else if uid != 0 && notDumpable(pid) {
			why = append(why, "it is not dumpable (it dropped privileges, ran a setuid program, or called prctl(PR_SET_DUMPABLE, 0)): "+
				"being its owner is not enough; run stackshot as root or with CAP_SYS_PTRACE")
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		scope := strings.TrimSpace(string(b))
		switch scope {
		case "1":
			why = append(why, "kernel.yama.ptrace_scope=1 lets only a parent trace: grant CAP_SYS_PTRACE (root has it), or set it to 0")
		case "2":
			why = append(why, "kernel.yama.ptrace_scope=2 needs CAP_SYS_PTRACE (root has it)")
		case "3":
			why = append(why, "kernel.yama.ptrace_scope=3 forbids ptrace until reboot")
		}
	}
	if len(why) == 0 && os.Geteuid() == 0 {
		why = append(why, "refused although stackshot runs as root: a container without CAP_SYS_PTRACE, or a security module (SELinux, AppArmor), forbids it; grant CAP_SYS_PTRACE or run on the host")
	} else if len(why) == 0 {
		why = append(why, "run as the process owner or as root (CAP_SYS_PTRACE); in a container, add CAP_SYS_PTRACE")
	}
	return strings.Join(why, "; ")
}

// Save captures each pid for saving (capture, core) and hands each
// capture to keep, with what is read after every thread runs again: its
// auxiliary vector (an ELF core's NT_AUXV) and, with kernel frames, their
// addresses, which only this host knows. It says why a pid could not be
// read; failed counts them. keep's error ends it; interrupted:
// ErrInterrupted.
func (s *Session) Save(pids []int, deadline time.Time, keep func(*ptrace.Process) error) (failed int, err error) {
	for _, pid := range pids {
		p, err := s.Capture(pid, deadline)
		if err != nil {
			s.o.Say(err.Error())
			failed++
			continue
		}
		if !p.Keep(s.o.Capture.TIDs, s.o.Say) {
			failed++
			continue
		}
		p.Auxv, _ = procmaps.ReadAuxv(p.MemPID())
		if s.o.Capture.Kernel {
			s.res.KernelAddrs(p)
		}
		if err := keep(p); err != nil {
			return failed, err
		}
	}
	if s.Interrupted() {
		return failed, ErrInterrupted
	}
	return failed, nil
}

// coreOwner reads what a core says of the process's parent, owner and
// command line (what cannot be read stays zero).
func coreOwner(pid int) capfile.CoreOwner {
	var o capfile.CoreOwner
	if st, err := procmaps.ReadStatus(pid); err == nil {
		o.PPID, o.UID, o.GID = st.PPid, st.UIDs[0], st.GIDs[0]
	}
	o.Args, _ = procmaps.ReadArgs(pid, 80)
	return o
}

// Core is capture p as an ELF core, with the memory what asks for read
// after its threads run again (no stop); what it left out is a warning.
func (s *Session) Core(p *ptrace.Process, what capfile.CoreMemory) ([]byte, error) {
	extra, note := capfile.CollectMemory(p, ptrace.MemReader{PID: p.MemPID()}, what)
	if note != "" {
		s.Warn("%s", note)
	}
	host, _ := os.Hostname()
	var buf bytes.Buffer
	if err := capfile.WriteCore(&buf, p, capfile.CoreOptions{Host: host, Kernel: s.o.Capture.Kernel, Extra: extra,
		Owner: coreOwner(p.PID)}); err != nil {
		return nil, fmt.Errorf("cannot write core of process %d (%v)", p.PID, err)
	}
	return buf.Bytes(), nil
}
