//go:build linux

package ptrace

import (
	"time"

	"stackshot/procmaps"
)

// Options control a capture.
type Options struct {
	Mode       Mode
	Consistent bool  // stop every thread first, resume together
	StackBytes int   // most stack bytes copied per thread (0: DefaultStackBytes)
	Kernel     bool  // read kernel stacks
	TIDs       []int // only these threads (empty: all)
	// Deadline bounds the capture (zero: none): no stop starts after it,
	// and the threads not reached are listed from /proc. A stop started
	// before it may outlast it by up to 100ms, so that a healthy thread is
	// never given up on for lack of time.
	Deadline time.Time
	StopWait time.Duration // how long to wait for one thread to stop (0: DefaultStopWait)
	// Cancel, when closed, ends the capture early (every thread detached).
	Cancel <-chan struct{}
	// Reuse is the previous capture of the same process (a sampler's last
	// tick): its identity, maps, build ids and vdso are kept, unless
	// RefreshMaps asks to read the maps again.
	Reuse       *Process
	RefreshMaps bool
	// Cache keeps the threads' /proc files open across captures (nil:
	// open them each time).
	Cache *procmaps.TaskCache
	// CheckAll, when set, is asked in auto mode instead of the check given
	// to Capture, about batches of the threads observed without a stop:
	// whether each one's no-stop capture is complete. It may send the
	// batch on and answer later: the function it returns gives the
	// answers, in the order of ths (missing ones: not complete). A checker
	// in another process (the sandboxed parser) answers a batch in one
	// round trip, and works on the first batches while the capture still
	// observes the other threads. Capture asks from one goroutine at a
	// time, and reads every answer, in the order it asked, before it
	// returns.
	CheckAll BatchCheck
	// BeforeTrace, when set, is called before the capture's first ptrace
	// call (a capture of blocked threads makes none): a command catches
	// SIGINT there for a clean detach, which costs it a locked OS thread
	// and hand-offs that a capture without a stop does not need.
	BeforeTrace func()
}

// DefaultStopWait bounds the wait for one thread to reach its stop (on a
// loaded machine a woken thread can wait long for a CPU). After two threads
// of a capture have timed out, the rest get a tenth of it: a hung process
// with many threads that will not stop must not take minutes.
const DefaultStopWait = 500 * time.Millisecond
