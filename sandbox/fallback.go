//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// A child that cannot be started, or dies before it is ready, costs the
// target its names, never its safety: what it was to parse is not parsed
// in-process (only --no-sandbox does that). Its start is tried twice
// (startRetries) with a deadline that grows with the machine's load
// (startDeadline), as a target can load the machine itself.

// startRetries is how many times a child that did not start is started
// again before its target's names are given up.
const startRetries = 1

// TryStart starts a child for target t. When none starts (twice), it says
// through say, in one line, that the names of what (e.g. "process 42") are
// lost and why, and returns a child that has failed: every request of it
// answers with that line, and its frames stay unnamed.
func TryStart(cfg Config, t Target, what string, say func(string)) *Child {
	child, err := Start(cfg, t)
	for i := 0; err != nil && i < startRetries; i++ {
		child, err = Start(cfg, t)
	}
	if err != nil {
		return notStarted(cfg, t, what, err, say)
	}
	return child
}

// notStarted is a child that never started, failed with the line said
// about it (NotStartedLine).
func notStarted(cfg Config, t Target, what string, err error, say func(string)) *Child {
	line := NotStartedLine(what, err)
	say(line)
	e := errors.New(line)
	return &Child{sock: -1, cfg: cfg, t: t, dead: e, startErr: e, memFor: -1}
}

// NotStartedLine is what is said when no child starts for what: its names
// are lost, not parsed in-process.
func NotStartedLine(what string, err error) string {
	why := strings.TrimPrefix(err.Error(), "the sandboxed parser did not start (")
	if why != err.Error() {
		why = strings.TrimSuffix(why, ")")
	}
	return fmt.Sprintf("names of %s lost: the sandboxed parser did not start (%s; --no-sandbox parses it inside stackshot itself)", what, why)
}

// NeverStarted reports whether c is a child that never started (TryStart,
// Launching.Child): its target's bytes were parsed nowhere.
func (c *Child) NeverStarted() bool { return c.proc == nil && c.startErr != nil }

// startDeadline is how long a child may take to start: startWait on an
// idle machine, times 1 + the load average per CPU, never past the time its
// work would be killed at (--timeout and the grace after it) when it has
// a deadline. A start's time grows with the run queue: on 2 CPUs it took
// 0.13 s on average at a load of 23, 1.15 s at 40 (stress-ng --cpu 20
// added), and a start at a load of 20 once missed the fixed 10 s; the
// deadline there is 110 s.
func startDeadline(cfg Config) time.Time {
	wait := startWait
	if load := loadAverage(); load > 0 {
		wait = time.Duration(float64(startWait) * (1 + load/float64(runtime.NumCPU())))
	}
	by := time.Now().Add(wait)
	if kill := cfg.Deadline.Add(grace); !cfg.Deadline.IsZero() && kill.Before(by) {
		by = kill
	}
	return by
}

// loadAverage is the machine's load over the last minute (0: unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	load, err := strconv.ParseFloat(f, 64)
	if err != nil || load < 0 || load > 1e6 {
		return 0
	}
	return load
}

// Launching is a child being started in the background (Launch): its
// exec and lockdown overlap the caller's work (a capture's /proc reads)
// until the child is first needed.
type Launching struct {
	done  chan struct{}
	child *Child
	err   error
	cfg   Config
	t     Target
}

// Launch starts a child for target t without waiting for it: Child
// waits. Its process starts in the background, not before Launch
// returns: the caller's capture has then usually read which CPUs the
// target's running threads are on, and the child starts kept off them
// (ptrace.Companion). Started first, its Go runtime's start put its
// threads beside a spinning target's: 30 sandboxed dumps froze a spinning
// thread for over 250 µs 28 to 44 times, against 3 to 14 started so.
func Launch(cfg Config, t Target) *Launching {
	l := &Launching{done: make(chan struct{}), cfg: cfg, t: t}
	go func() {
		defer close(l.done)
		if l.child, l.err = spawn(cfg, t); l.err == nil {
			l.child.sendSetup()
		}
	}()
	return l
}

// Early waits until the child Launch started has its setup, and returns
// it before it is ready: requests made of it wait in the socket while it
// starts, and its first answer read is its setup's (Child.Started). nil:
// it could not be started (Child says why).
func (l *Launching) Early() *Child {
	<-l.done
	return l.child
}

// Child waits for the child Launch started to be ready and returns it.
// One that did not start is started again, once (what it was sent
// meanwhile, a capture's checks, went unanswered: those threads were
// stopped). When that fails too, it says through say, as TryStart does,
// that the names of what are lost and why, and returns a child that has
// failed.
func (l *Launching) Child(what string, say func(string)) *Child {
	<-l.done
	err := l.err
	if err == nil {
		err = l.child.Started()
	}
	if err == nil {
		return l.child
	}
	for i := 0; i < startRetries; i++ {
		var child *Child
		if child, err = Start(l.cfg, l.t); err == nil {
			return child
		}
	}
	return notStarted(l.cfg, l.t, what, err, say)
}

// inProcessParses counts the parsings of a live target's bytes done
// inside stackshot itself (CountInProcess): tests read it (InProcess) to
// show that a sandboxed target's never were.
var inProcessParses atomic.Int64

// onInProcess, set by stackshot built with the stackshot_testhooks tag,
// is told of each (the command's tests read it from another process).
var onInProcess func(what string)

// CountInProcess records that what (a target's bytes) is being parsed
// inside stackshot itself.
func CountInProcess(what string) {
	inProcessParses.Add(1)
	if onInProcess != nil {
		onInProcess(what)
	}
}

// InProcess is how many parsings CountInProcess counted.
func InProcess() int64 { return inProcessParses.Load() }
