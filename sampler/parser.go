//go:build linux

package sampler

import (
	"errors"

	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/sandbox"
	"stackshot/unwind"
)

// parser unwinds one target's raw threads and names their frames: the
// parsing of what the target controls (its ELF files, CFI, memory). It
// runs in-process (inProcess, with resolve) or in the target's sandboxed
// child (boxed), which gets each tick's threads in one round trip.
type parser interface {
	// warm parses what the first capture p needs (CFI, symbols, debug
	// info) before the ticks, so that loading it does not eat them.
	warm(p *ptrace.Process)
	// images reads p's build ids and vdso when the capture lacks them.
	images(p *ptrace.Process)
	// prepare points the parser at the last capture before the next one
	// (check then uses it).
	prepare(last *ptrace.Process)
	// checks say whether threads captured without a stop unwind
	// completely: one at a time (ptrace.CheckFunc), or all of a round's
	// in batches (ptrace.Options.CheckAll); one of them is nil.
	checks() (ptrace.CheckFunc, ptrace.BatchCheck)
	// walk unwinds ths, threads of capture p, and calls each with each
	// one's walk in turn (fr valid during the call only); why, when set,
	// says why the walk could not be made (fr is then the PC alone). py
	// is the thread's Python frames, once python found the interpreter
	// (nil: none).
	walk(p *ptrace.Process, ths []*ptrace.Thread, each walkFunc)
	// python looks for the target's CPython interpreter in cands (the
	// target is id), so that the walks that follow give each thread's
	// Python frames too: its version ("": none), or why it cannot be
	// read.
	python(p *ptrace.Process, id procmaps.Identity, cands []*procmaps.Mapping) (string, error)
	// frames names a walk of th from the last walk call: its kernel
	// frames, then each frame's logical frames.
	frames(th *ptrace.Thread, fr []unwind.Frame, ok bool) []report.Frame
}

// walkFunc receives one thread's walk (see parser.walk).
type walkFunc func(i int, fr []unwind.Frame, stop unwind.StopReason, ok bool, why string, py *pyruntime.Thread)

// inProcess parses in stackshot itself: the target's own user's process
// (or --no-sandbox).
type inProcess struct {
	res   *resolve.Resolver
	space *resolve.Space
	mem   ptrace.MemReader
	buf   []unwind.Frame
	py    *pyruntime.Runtime // (nil: none, or not looked for)
	tids  map[int]bool
}

func newInProcess(res *resolve.Resolver, p *ptrace.Process) *inProcess {
	mem := ptrace.MemReader{PID: p.MemPID()}
	return &inProcess{res: res, mem: mem, space: res.Space(p, mem)}
}

func (ip *inProcess) warm(p *ptrace.Process) {
	ip.res.PrefetchDebug(p) // (debuginfod) before the ticks, not during them
	ip.res.Process(p, ip.mem)
}

func (ip *inProcess) images(p *ptrace.Process) {
	if p.BuildIDs == nil {
		resolve.CollectImages(p, ip.mem)
	}
}

func (ip *inProcess) prepare(last *ptrace.Process) { ip.space.Update(last) }

func (ip *inProcess) checks() (ptrace.CheckFunc, ptrace.BatchCheck) {
	return ip.check, nil
}

func (ip *inProcess) check(p *ptrace.Process, th *ptrace.Thread) bool {
	ip.images(p)
	ip.space.Update(p)
	return ip.space.CheckNoStop(th)
}

func (ip *inProcess) walk(p *ptrace.Process, ths []*ptrace.Thread, each walkFunc) {
	ip.space.Update(p)
	var py map[int]*pyruntime.Thread
	if ip.py != nil {
		threads, _ := ip.py.Threads()
		clear(ip.tids)
		for i := range p.Threads {
			ip.tids[p.Threads[i].TID] = true
		}
		py = pyruntime.ByTID(ip.py, threads, ip.tids)
	}
	for i, th := range ths {
		fr, stop, ok := ip.space.Unwind(th, ip.buf[:0])
		ip.buf = fr
		each(i, fr, stop, ok, "", py[th.TID])
	}
}

func (ip *inProcess) python(p *ptrace.Process, _ procmaps.Identity, cands []*procmaps.Mapping) (string, error) {
	rt, err := pyruntime.OpenLive(p.MemPID(), cands, ip.mem)
	if errors.Is(err, pyruntime.ErrNotPython) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	ip.py, ip.tids = rt, map[int]bool{}
	return rt.Version, nil
}

func (ip *inProcess) frames(th *ptrace.Thread, fr []unwind.Frame, ok bool) []report.Frame {
	return ip.res.Frames(ip.space, th, fr, ok, nil)
}

// boxed parses in the target's sandboxed child (see package sandbox):
// the child unwinds each tick's threads and names each address the first
// time it meets it; here the walks are only counted and keyed. A failed
// child costs the names (said once, through warn): the walks are then
// each thread's PC alone, unnamed, and the recording goes on.
type boxed struct {
	child  *sandbox.Child
	w      *sandbox.Walker
	res    *resolve.Resolver // kernel frames only: the kernel named them
	warn   func(string)
	warned bool
}

// A child that never started was said so by whoever started it
// (sandbox.TryStart, Launching.Child): its errors, that line again, are
// not said twice.
func newBoxed(child *sandbox.Child, res *resolve.Resolver, warn func(string)) *boxed {
	return &boxed{child: child, w: child.Walker(), res: res, warn: warn, warned: child.NeverStarted()}
}

func (b *boxed) warm(p *ptrace.Process) {
	var ths []*ptrace.Thread
	for i := range p.Threads {
		if !p.Threads[i].Kernel {
			ths = append(ths, &p.Threads[i])
		}
	}
	b.walk(p, ths, func(int, []unwind.Frame, unwind.StopReason, bool, string, *pyruntime.Thread) {})
}

func (b *boxed) images(p *ptrace.Process) {
	if err := b.child.Images(p); err != nil {
		b.say(err.Error())
	}
}

func (b *boxed) prepare(*ptrace.Process) {}

// checks: a tick's threads are checked in the child, in batches sent as
// they are observed (ptrace.Options.CheckAll).
func (b *boxed) checks() (ptrace.CheckFunc, ptrace.BatchCheck) {
	return nil, b.child.CheckAll()
}

func (b *boxed) walk(p *ptrace.Process, ths []*ptrace.Thread, each walkFunc) {
	ws, err := b.w.Walk(p, ths)
	if err != nil {
		b.say(err.Error())
	}
	for i := range ws {
		each(i, ws[i].Frames, ws[i].Stop, ws[i].OK, ws[i].Err, ws[i].Python)
	}
}

// python: the child opens the interpreter and keeps it for the target;
// each walk's round trip then brings the threads' Python frames too.
func (b *boxed) python(p *ptrace.Process, id procmaps.Identity, cands []*procmaps.Mapping) (string, error) {
	return b.w.OpenRuntime(p, id, "python", cands)
}

// say warns once: a dead child fails every tick the same way.
func (b *boxed) say(msg string) {
	if !b.warned && b.warn != nil {
		b.warned = true
		b.warn(msg)
	}
}

func (b *boxed) frames(th *ptrace.Thread, fr []unwind.Frame, ok bool) []report.Frame {
	out := b.res.KernelFrames(th, nil)
	if !ok {
		if sc := th.Syscall; sc != nil && sc.PC != 0 && !sc.Running {
			// Only /proc: the PC it is blocked at (as resolve names it).
			out = b.w.Name(out, unwind.Frame{PC: sc.PC, SP: sc.SP, Exact: true, Method: unwind.MethodRegs})
		}
		return out
	}
	for _, f := range fr {
		out = b.w.Name(out, f)
	}
	return out
}
