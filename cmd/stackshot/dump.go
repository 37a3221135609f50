//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"stackshot/output"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
)

// session holds what a command shares across its targets.
type session struct {
	c      *common
	sym    *symtab.Symbolizer
	res    *resolve.Resolver
	cancel chan struct{}
	warned map[string]bool
}

func newSession(c *common) *session {
	s := &session{c: c, cancel: make(chan struct{}), warned: map[string]bool{}}
	s.sym = symtab.New(symtab.Options{DebugDirs: c.debugDirs, NoDemangle: c.noDemangle, NamesOnly: c.namesOnly()})
	s.res = resolve.NewResolver(s.sym, resolve.Options{MaxFrames: c.maxFrames, Kernel: c.kernel, Live: true,
		KernelAddrs: c.format == "json"})
	return s
}

// catchSignals makes SIGINT/SIGTERM end the command cleanly: captures in
// flight detach every thread before it returns.
func (s *session) catchSignals() func() {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			close(s.cancel)
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
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
	msg := fmt.Sprintf(format, args...)
	if s.c.quiet || s.warned[msg] {
		return
	}
	s.warned[msg] = true
	fmt.Fprintf(os.Stderr, "stackshot: %s\n", msg)
}

func (s *session) captureOptions(deadline time.Time) ptrace.Options {
	mode, _ := s.c.captureMode()
	return ptrace.Options{Mode: mode, Consistent: s.c.consistent, StackBytes: s.c.stackBytes,
		Kernel: s.c.kernel, TIDs: s.c.tids, Deadline: deadline, Cancel: s.cancel}
}

// capture takes one raw snapshot of pid, with build ids and the vdso.
func (s *session) capture(pid int, deadline time.Time) (*ptrace.Process, error) {
	var space interface{ CheckNoStop(*ptrace.Thread) bool }
	check := func(p *ptrace.Process, th *ptrace.Thread) bool {
		if space == nil {
			mem := ptrace.MemReader{PID: p.MemPID()}
			resolve.CollectImages(p, mem)
			space = s.res.Space(p, mem)
		}
		return space.CheckNoStop(th)
	}
	p, err := ptrace.Capture(pid, s.captureOptions(deadline), check)
	if err != nil {
		return nil, explainCaptureError(pid, err)
	}
	if p.BuildIDs == nil {
		resolve.CollectImages(p, ptrace.MemReader{PID: p.MemPID()})
	}
	s.noteProcess(p)
	return p, nil
}

// noteProcess turns per-thread conditions into one-line warnings.
func (s *session) noteProcess(p *ptrace.Process) {
	denied := 0
	for _, th := range p.Threads {
		if s.c.kernel && th.KernelOutcome == ptrace.KernelDenied {
			s.warn("kernel stacks are not readable (need root or CAP_SYS_ADMIN); showing user frames only")
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
	switch c.format {
	case "", "text", "json":
	default:
		return usageError{fmt.Sprintf("dump writes text or json, not %q", c.format)}
	}
	s := newSession(c)
	stop := s.catchSignals()
	defer stop()
	deadline := time.Now().Add(c.timeout)
	var procs []*report.Process
	failed := 0
	for _, pid := range c.pids {
		if s.interrupted() {
			break
		}
		p, err := s.capture(pid, deadline)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stackshot: %v\n", err)
			failed++
			continue
		}
		if missing := missingThreads(c.tids, p); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "stackshot: no thread %s in process %d (list its threads with 'ls /proc/%d/task')\n",
				joinInts(missing), pid, pid)
			if len(p.Threads) == 0 {
				failed++
				continue
			}
		}
		procs = append(procs, s.res.Process(p, ptrace.MemReader{PID: p.MemPID()}))
	}
	if s.interrupted() {
		fmt.Fprintln(os.Stderr, "stackshot: interrupted (every thread was detached; nothing written)")
		return exitError{exitTarget}
	}
	if len(procs) > 0 {
		if err := c.writeReport(procs); err != nil {
			return err
		}
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
	return writeOutput(c.output, buf.Bytes())
}

// writeOutput writes the whole report at once: to stdout, or to a file
// through a temporary name, so nothing half-written is ever seen.
func writeOutput(path string, data []byte) error {
	if path == "" || path == "-" {
		_, err := os.Stdout.Write(data)
		return err
	}
	tmp := path + ".tmp." + fmt.Sprint(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s (%v; check the directory exists and is writable)", path, errors.Unwrap(err))
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s (%v)", path, err)
	}
	return nil
}

func explainCaptureError(pid int, err error) error {
	switch {
	case errors.Is(err, ptrace.ErrNoProcess):
		if strings.Contains(err.Error(), "is a thread of") {
			return fmt.Errorf("cannot read process %d (%v; give the process id)", pid, err)
		}
		return fmt.Errorf("cannot read process %d (no such process; check the pid with ps)", pid)
	case errors.Is(err, ptrace.ErrPermission):
		return fmt.Errorf("cannot read process %d (permission denied; %s)", pid, permissionHelp(pid))
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
			why = append(why, fmt.Sprintf("it belongs to uid %d: run as that user or as root", st.UID))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		scope := strings.TrimSpace(string(b))
		switch scope {
		case "1":
			why = append(why, "kernel.yama.ptrace_scope=1 lets only a parent trace: run as root, grant CAP_SYS_PTRACE, or set it to 0")
		case "2":
			why = append(why, "kernel.yama.ptrace_scope=2 needs CAP_SYS_PTRACE: run as root")
		case "3":
			why = append(why, "kernel.yama.ptrace_scope=3 forbids ptrace until reboot")
		}
	}
	if len(why) == 0 {
		why = append(why, "run as the process owner or as root (CAP_SYS_PTRACE); in a container, add CAP_SYS_PTRACE")
	}
	return strings.Join(why, "; ")
}

// missingThreads lists the requested thread ids (-t) the capture lacks.
func missingThreads(tids []int, p *ptrace.Process) []int {
	var out []int
	for _, t := range tids {
		found := false
		for i := range p.Threads {
			if p.Threads[i].TID == t {
				found = true
				break
			}
		}
		if !found {
			out = append(out, t)
		}
	}
	return out
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
