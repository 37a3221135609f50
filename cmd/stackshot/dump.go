//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"stackshot/internal/safefile"
	"stackshot/internal/term"
	"stackshot/output"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
	"stackshot/symtab"
)

// session holds what a command shares across its targets.
type session struct {
	c      *common
	sym    *symtab.Symbolizer
	res    *resolve.Resolver
	cancel <-chan struct{}
	warned map[string]bool
	boxes  map[int]*sandbox.Child // sandboxed children, by target (sandbox.go)
}

func newSession(c *common) *session { return newSessionFor(c, false) }

// newSamplingSession is newSession for record: its resolver compiles each
// module's CFI whole, which pays off over many samples.
func newSamplingSession(c *common) *session { return newSessionFor(c, true) }

func newSessionFor(c *common, sampling bool) *session {
	sym := c.newSymbolizer()
	return &session{c: c, sym: sym, warned: map[string]bool{}, cancel: make(chan struct{}),
		res: resolve.NewResolver(sym, resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel, Live: true,
			KernelAddrs: c.format == "json", Sampler: sampling})}
}

// catchSignals makes SIGINT/SIGTERM end the command cleanly: captures in
// flight detach every thread before it returns.
func (s *session) catchSignals() func() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	s.cancel = ctx.Done()
	return stop
}

func (s *session) interrupted() bool {
	select {
	case <-s.cancel:
		return true
	default:
		return false
	}
}

func (s *session) warn(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); !s.c.quiet && !s.warned[msg] {
		s.warned[msg] = true
		printErr("stackshot: %s", msg)
	}
}

func (s *session) captureOptions(deadline time.Time) ptrace.Options {
	mode, _ := s.c.captureMode()
	return ptrace.Options{Mode: mode, Consistent: s.c.consistent, StackBytes: s.c.stackBytes,
		Kernel: s.c.kernel, TIDs: s.c.tids, Deadline: deadline, Cancel: s.cancel}
}

// capture takes one raw snapshot of pid, with build ids and the vdso.
func (s *session) capture(pid int, deadline time.Time) (*ptrace.Process, error) {
	resume := s.c.debuginfod.Pause() // (fetches wait for the threads to run again)
	p, err := s.captureLive(pid, s.captureOptions(deadline))
	resume()
	if err != nil {
		return nil, explainCaptureError(pid, err)
	}
	s.noteProcess(p)
	return p, nil
}

// captureEach captures each pid in turn and hands the capture to use,
// saying on stderr why a pid could not be read (or lacks the threads asked
// for, or was replaced meanwhile). use reads the live process and returns
// what to keep once the pid is known to still name the process captured.
// It returns how many could not; interrupted, an exitError (every thread
// was detached, nothing is written).
func (s *session) captureEach(deadline time.Time, use func(*ptrace.Process) (keep func(), err error)) (failed int, err error) {
	for _, pid := range s.c.pids {
		if s.interrupted() {
			break
		}
		id, _ := procmaps.ReadIdentity(pid) // a failure shows in the capture
		p, err := s.safeCapture(pid, deadline)
		if err != nil {
			printErr("stackshot: %v", err)
		}
		if err != nil || !s.c.keepThreads(p) {
			failed++
			continue
		}
		if afterCaptureHook != nil {
			afterCaptureHook(pid)
		}
		keep, err := use(p)
		if err == nil && id.PID != 0 {
			err = sameProcess(id)
		}
		if err != nil {
			printErr("stackshot: %v", err)
			failed++
			continue
		}
		keep()
	}
	if s.interrupted() {
		printErr("stackshot: interrupted (every thread was detached; nothing written)")
		return failed, exitError{exitTarget}
	}
	return failed, nil
}

// resolveLive unwinds, symbolizes and diagnoses a live capture.
func (s *session) resolveLive(p *ptrace.Process) (*report.Process, error) {
	rp, err := s.resolveCaptured(p)
	if err != nil {
		return nil, err
	}
	s.diagnose(rp, p)
	s.addGoroutines(p, rp, s.c.started.Add(s.c.timeout))
	return rp, nil
}

// noteProcess turns per-thread conditions into one-line warnings.
func (s *session) noteProcess(p *ptrace.Process) {
	denied := 0
	for _, th := range p.Threads {
		if s.c.kernel && th.KernelOutcome == ptrace.KernelDenied {
			s.warn("kernel stacks are not readable (%s; showing user frames only)", map[bool]string{
				false: "they need root or CAP_SYS_ADMIN", true: "refused although stackshot runs as root: a container or a security module hides them"}[os.Geteuid() == 0])
		}
		if th.Outcome == ptrace.OutcomeNotPermitted {
			denied++
		}
	}
	if denied > 0 {
		s.warn("%s", permissionHelp(p.PID))
	}
}

func cmdDump(args []string) error {
	c := newCommon("dump")
	if err := c.parse(args, true); err != nil {
		return err
	}
	if err := checkWritable(c.output); err != nil {
		return err
	}
	if err := c.checkDiagFlags(); err != nil {
		return err
	}
	s := newSession(c)
	stop := s.catchSignals()
	defer stop()
	defer s.closeSandboxes()
	var procs []*report.Process
	var failed int
	var err error
	if c.diag.count > 1 {
		procs, failed, err = s.dumpSnapshots()
	} else {
		failed, err = s.captureEach(time.Now().Add(c.timeout), func(p *ptrace.Process) (func(), error) {
			rp, err := s.resolveLive(p)
			return func() { procs = append(procs, rp) }, err
		})
	}
	if err != nil {
		return err
	}
	if len(procs) > 0 {
		if err := c.writeReport(procs); err != nil {
			return err
		}
		c.symbolizerNotes(s.sym)
	}
	if failed > 0 {
		return exitError{exitTarget}
	}
	return nil
}

// writeReport renders dump-style reports (text or JSON) and writes them
// whole.
func (c *common) writeReport(procs []*report.Process) error {
	var buf bytes.Buffer
	var err error
	if c.format == "json" {
		err = output.JSONList(&buf, procs, len(c.pids) > 1 || len(procs) > 1)
	} else {
		err = output.Text(&buf, procs, output.TextOptions{Source: c.source, Inline: c.inline, Verbose: c.verbose})
	}
	if err != nil {
		return err
	}
	// The text writer escapes each target string; this catches any a
	// renderer forgot. encoding/json escapes C0 controls only.
	var data []byte
	if c.format == "json" {
		data = term.EscapeJSON(buf.Bytes())
	} else {
		data = term.EscapeText(buf.Bytes())
	}
	return writeOutput(c.output, data)
}

// writeOutput writes the whole report at once: to stdout, or to a file
// through a temporary name, so nothing half-written is ever seen.
func writeOutput(path string, data []byte) error {
	return writeOutputMode(path, data, safefile.Public)
}

// writeOutputMode is writeOutput for a file of mode m (safefile.Private for
// captures and cores: they hold the target's raw memory).
func writeOutputMode(path string, data []byte, m safefile.Mode) error {
	if path == "" || path == "-" {
		_, err := os.Stdout.Write(data)
		return err
	}
	return safefile.WriteFile(path, data, m)
}

func explainCaptureError(pid int, err error) error {
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

// keepThreads keeps the threads asked for with -t (a saved capture has
// them all) and says which are missing; false when none is left.
func (c *common) keepThreads(p *ptrace.Process) bool {
	if missing := p.KeepThreads(c.tids); len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "stackshot: %s\n", ptrace.MissingThreads(p.PID, missing))
	}
	return len(p.Threads) > 0
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
