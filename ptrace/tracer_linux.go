//go:build linux

package ptrace

import (
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// tracer owns one OS thread: every ptrace call for the tracees it seized
// must come from that thread. Work is handed to it as closures.
//
// When a tracee will not stop, the tracer is abandoned: its goroutine
// returns while still locked, the runtime ends the OS thread, and the kernel
// detaches every tracee that thread still held (clearing the pending
// interrupt), so nothing is left stopped.
type tracer struct {
	jobs      chan func()
	abandoned atomic.Bool
	done      chan struct{}
	scratch   []byte // stack copies land here during a stop (tracer thread only)
}

// minScratch is the scratch buffer's first size: a thread's stack from its
// SP to the end of its mapping is usually a few KiB.
const minScratch = 64 << 10

// scratchFor returns n bytes of the scratch buffer, grown and pre-faulted
// as needed (touching every page once, outside any stop).
func (t *tracer) scratchFor(n int) []byte {
	if n > len(t.scratch) {
		size := minScratch
		for size < n {
			size *= 2
		}
		t.scratch = make([]byte, size)
		for i := 0; i < size; i += 4096 {
			t.scratch[i] = 0xff
		}
	}
	return t.scratch[:n]
}

func newTracer() *tracer {
	t := &tracer{jobs: make(chan func()), done: make(chan struct{})}
	started := make(chan struct{})
	go t.start(started)
	<-started
	return t
}

// start locks the goroutine to its OS thread and serves jobs there. The
// process's main thread never serves: the runtime cannot end it (it parks
// it instead), so an abandoned tracer there would keep its tracees traced.
// A goroutine that lands on it starts another, which lands elsewhere while
// this one holds the main thread, and leaves.
func (t *tracer) start(started chan<- struct{}) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		next := make(chan struct{})
		go t.start(next)
		<-next
		runtime.UnlockOSThread()
		close(started)
		return
	}
	close(started)
	t.loop()
}

func (t *tracer) loop() {
	// Never unlocked: when this goroutine returns the thread exits, which
	// detaches whatever it still traces.
	defer close(t.done)
	for f := range t.jobs {
		f()
		if t.abandoned.Load() {
			return
		}
	}
}

// do runs f on the tracer thread and waits for it. It reports false if the
// tracer is gone (abandoned). With a non-nil early channel, do returns as
// soon as the job has sent on it (or finished) — the job may still run.
func (t *tracer) do(f func(), early ...chan stopResult) bool {
	if t.abandoned.Load() {
		return false
	}
	ran := make(chan struct{})
	select {
	case t.jobs <- func() { f(); close(ran) }:
	case <-t.done:
		return false
	}
	if len(early) > 0 {
		return true // the caller waits on its own channel
	}
	<-ran
	return true
}

// close ends the tracer thread.
func (t *tracer) close() {
	if !t.abandoned.Load() {
		close(t.jobs)
	}
	<-t.done
}

// tracers keeps one tracer thread across captures (a sampler takes
// thousands): between captures it traces nothing. mu makes captures run
// one at a time, since they share it.
var tracers struct {
	mu sync.Mutex
	t  *tracer // nil, or the last live one
}

// tracer returns the capture's tracer thread: the shared one, or a new one
// once it has been abandoned. Only called with tracers.mu held.
func (c *capturer) tracer() *tracer {
	if c.t == nil && c.opt.BeforeTrace != nil {
		c.opt.BeforeTrace()
	}
	if c.t == nil || c.t.abandoned.Load() {
		if t := tracers.t; t != nil && !t.abandoned.Load() {
			c.t = t
		} else {
			c.t = newTracer()
			tracers.t = c.t
		}
	}
	return c.t
}
