package resolve

import (
	"io"
	"strings"

	"stackshot/internal/arch"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/symtab"
	"stackshot/unwind"
)

// CollectImages reads, from a live target's memory, what a saved capture
// needs to be symbolized faithfully later: the build id of every mapped ELF
// file and the vdso image. It needs no ptrace stop.
func CollectImages(p *ptrace.Process, mem io.ReaderAt) {
	if p.BuildIDs == nil {
		p.BuildIDs = map[uint64]string{}
	}
	ms := procmaps.Maps(p.Maps)
	for i := range ms {
		m := &ms[i]
		switch m.Kind {
		case procmaps.KindVDSO:
			if len(p.VDSO) == 0 && m.End-m.Start <= 1<<20 {
				buf := make([]byte, m.End-m.Start)
				if n, _ := mem.ReadAt(buf, int64(m.Start)); n == len(buf) {
					p.VDSO = buf
				}
			}
		case procmaps.KindFile, procmaps.KindMemfd:
			first := ms.FirstOfFile(m)
			if first != m || m.Offset != 0 || !m.Readable() {
				continue
			}
			if id, err := symtab.BuildIDFromMemory(mem, m.Start); err == nil && id != "" {
				p.BuildIDs[m.Start] = id
			}
		}
	}
}

// Process unwinds and symbolizes every thread of a capture. mem reads the
// live target's memory (nil for a saved capture).
func (r *Resolver) Process(p *ptrace.Process, mem io.ReaderAt) *report.Process {
	s := r.Space(p, mem)
	out := &report.Process{PID: p.PID, Comm: p.Comm, Exe: p.Exe, Time: p.Time, State: p.State, FatalSignal: p.FatalSignal,
		Warnings: p.Warnings, WallNS: p.WallNS}
	for i := range p.Threads {
		out.Threads = append(out.Threads, r.safeThread(s, &p.Threads[i]))
	}
	if r.checked.p == p {
		r.checked.reset() // resolved: the walks are not needed again
	}
	if r.opts.KernelAddrs && r.opts.Kernel {
		r.kernelAddrs(out)
	}
	s.javaThreads(out)
	out.Warnings = append(out.Warnings[:len(out.Warnings):len(out.Warnings)], s.warnings...)
	return out
}

// kernelAddrs fills in the addresses of kernel frames that the stack file
// showed by name only ("[<0>] vfs_read+0x397/0x3d0", as kernels print for
// any reader), from one pass over /proc/kallsyms.
func (r *Resolver) kernelAddrs(p *report.Process) {
	want := map[string]bool{}
	for i := range p.Threads {
		for _, f := range p.Threads[i].Frames {
			if f.Kind == "kernel" && f.PC == 0 && f.Function != "" {
				if _, known := r.kaddr[f.Function]; !known {
					want[f.Function] = true
				}
			}
		}
	}
	r.lookupKernel(want)
	for i := range p.Threads {
		fr := p.Threads[i].Frames
		for j := range fr {
			if f := &fr[j]; f.Kind == "kernel" && f.PC == 0 && f.Function != "" {
				if a := r.kaddr[f.Function]; a != 0 {
					f.PC = a + f.Offset
				}
			}
		}
	}
}

// KernelAddrs fills in, in a raw capture, the addresses of kernel frames
// the stack file showed by name only, from this host's /proc/kallsyms:
// a saved capture then carries them (another machine's kallsyms, or this
// one after a reboot, would not match).
func (r *Resolver) KernelAddrs(p *ptrace.Process) {
	want := map[string]bool{}
	for i := range p.Threads {
		for _, k := range p.Threads[i].KernelStack {
			if k.Addr == 0 && k.Function != "" {
				if _, known := r.kaddr[k.Function]; !known {
					want[k.Function] = true
				}
			}
		}
	}
	r.lookupKernel(want)
	for i := range p.Threads {
		ks := p.Threads[i].KernelStack
		for j := range ks {
			if k := &ks[j]; k.Addr == 0 && k.Function != "" {
				if a := r.kaddr[k.Function]; a != 0 {
					k.Addr = a + k.Offset
				}
			}
		}
	}
}

// lookupKernel adds the addresses of the wanted kernel symbols to the
// resolver's table (0: not found, or hidden from us), in one pass over
// /proc/kallsyms.
func (r *Resolver) lookupKernel(want map[string]bool) {
	if len(want) == 0 {
		return
	}
	got, _ := r.sym.KallsymsAddrs(want)
	if r.kaddr == nil {
		r.kaddr = map[string]uint64{}
	}
	for n := range want {
		r.kaddr[n] = got[n]
	}
}

// Head is what a thread's report says from its capture alone, before any
// unwinding: who it is, its state and system call, how it was captured,
// and the capture's error. Unwinding adds its frames, Stop and an Error of
// its own.
func Head(th *ptrace.Thread) report.Thread {
	return report.Thread{TID: th.TID, Name: th.Name, State: th.State, Syscall: convSyscall(th),
		Capture: th.Method, PauseNS: th.PauseNS, Error: th.Err, Torn: th.Torn, Signal: th.Signal,
		CalleeSaved: calleeSaved(th.Regs)}
}

// calleeSaved picks the registers a lock call keeps its lock in from a
// stopped thread's register set (nil when it was not stopped).
func calleeSaved(regs []uint64) []uint64 {
	if len(regs) < arch.UserRegsCount {
		return nil
	}
	return []uint64{regs[arch.UserRBX], regs[arch.UserRBP], regs[arch.UserR12], regs[arch.UserR13],
		regs[arch.UserR14], regs[arch.UserR15]}
}

func (r *Resolver) thread(s *Space, th *ptrace.Thread) report.Thread {
	t := Head(th)
	fr, stop, ok := s.Unwind(th, r.frames[:0])
	r.frames = fr
	t.Frames = r.Frames(s, th, fr, ok, nil)
	if !ok {
		return t
	}
	if !stop.Complete() && endsAtRoot(t.Frames) {
		// The walk could not go past a function that starts threads or
		// goroutines: nothing lies beyond it, so the stack is complete.
		stop = unwind.StopEnd
	}
	t.Stop = stop.String()
	if !stop.Complete() && t.Error == "" {
		t.Error = "stack incomplete: " + stop.String()
		if why := th.SpareReason(); why != "" {
			t.Error += "; " + why
		}
	}
	if th.Torn && t.Error == "" {
		t.Error = "stack may be torn: the thread ran while it was copied"
	}
	return t
}

// Frames symbolizes a thread's stack: its kernel frames (when enabled),
// then the logical frames of each physical frame fr (from Space.Unwind; ok
// false when there were no registers to unwind from), appended to out.
func (r *Resolver) Frames(s *Space, th *ptrace.Thread, fr []unwind.Frame, ok bool, out []report.Frame) []report.Frame {
	// One allocation of about the size needed (inlined frames may add
	// some) instead of a doubling per append: for thousands of threads
	// that is megabytes of fresh memory to fault in.
	if want := len(out) + len(th.KernelStack) + len(fr) + 1; cap(out) < want {
		out = append(make([]report.Frame, 0, want), out...)
	}
	if r.opts.Kernel {
		out = r.kernelFrames(th, out)
	}
	if !ok {
		if th.Syscall != nil && th.Syscall.PC != 0 && !th.Syscall.Running {
			// Only /proc: the PC it is blocked at is still worth naming.
			out = r.userFrame(s, out, unwind.Frame{PC: th.Syscall.PC, SP: th.Syscall.SP, Exact: true, Method: unwind.MethodRegs})
		}
		return out
	}
	for _, f := range fr {
		var java bool
		if out, java = s.javaFrames(th, out, f); !java {
			out = r.userFrame(s, out, f)
		}
	}
	return out
}

// KernelFrames appends a thread's kernel frames, when enabled (Frames'
// first part: the kernel named them, or kallsyms does).
func (r *Resolver) KernelFrames(th *ptrace.Thread, out []report.Frame) []report.Frame {
	if !r.opts.Kernel {
		return out
	}
	return r.kernelFrames(th, out)
}

func (r *Resolver) kernelFrames(th *ptrace.Thread, out []report.Frame) []report.Frame {
	for _, k := range th.KernelStack {
		f := report.Frame{PC: k.Addr, Kind: "kernel", Function: k.Function, Offset: k.Offset,
			HasOffset: k.Function != "", Method: "kernel"}
		if f.Function == "" && k.Addr != 0 {
			if ks := r.kallsyms(); ks != nil {
				if name, off, ok := ks.Lookup(k.Addr); ok {
					f.Function, f.Offset, f.HasOffset = name, off, true
				}
			}
		}

		out = append(out, f)
	}
	return out
}

func (r *Resolver) kallsyms() *symtab.Kallsyms {
	if !r.kallOK {
		r.kallOK = true
		r.kall, _ = r.sym.Kallsyms()
	}
	return r.kall
}

// userFrame appends the logical frames (inlined ones first) of one physical
// frame. What a module names is kept per PC for the space: a deep
// recursion repeats the same return address (only SP differs).
func (r *Resolver) userFrame(s *Space, out []report.Frame, f unwind.Frame) []report.Frame {
	key := namedKey{pc: f.PC, method: f.Method, exact: f.Exact, signal: f.SignalFrame}
	k, ok := s.lastNamed, s.lastNamedOK && s.lastKey == key
	if !ok {
		k, ok = s.named[key]
		s.lastKey, s.lastNamed, s.lastNamedOK = key, k, ok
	}
	if ok {
		// One copy of the kept frames, then their SP (a frame is 168
		// bytes, and a range loop copied each twice: into its variable,
		// then into out).
		n := len(out)
		out = append(out, s.namedFrames[k.from:k.to]...)
		for i := n; i < len(out); i++ {
			out[i].SP = f.SP
		}
		return out
	}
	n := len(out)
	out, keep := r.nameFrame(s, out, f)
	if keep {
		s.keepNamed(key, out[n:])
	}
	return out
}

// nameFrame is userFrame without the memo; keep says whether its answer
// is the module's alone (and may be kept).
func (r *Resolver) nameFrame(s *Space, out []report.Frame, f unwind.Frame) (_ []report.Frame, keep bool) {
	base := report.Frame{PC: f.PC, SP: f.SP, Kind: "user", Method: f.Method.String(), SignalFrame: f.SignalFrame}
	lookup := f.PC
	if !f.Exact && !f.SignalFrame && lookup > 0 {
		lookup-- // a return address: the call is the instruction before
	}
	m, ok := s.maps.Find(lookup)
	if !ok {
		return append(out, base), false
	}
	if m.Kind == procmaps.KindVDSO {
		base.Module = "[vdso]"
	} else {
		base.Module = m.Path
	}
	base.MapStart, base.MapLimit, base.MapOffset = m.Start, m.End, m.Offset
	e := s.module(m)
	if e.mod == nil {
		base.ModuleOffset, base.HasModule = f.PC-m.Start+m.Offset, base.Module != ""
		if e.missing {
			base.ModuleMissing = true
			base.BuildID = s.p.BuildIDs[s.maps.FirstOfFile(m).Start]
		}
		// JIT code: anonymous or memfd mappings named by /tmp/perf-PID.map.
		if m.Executable() && m.Kind != procmaps.KindVsyscall {
			if pm := r.sym.PerfMapFor(s.p.PID, rootFor(s, r.opts.Live)); pm != nil {
				if name, off, ok := pm.Lookup(f.PC); ok {
					base.Function, base.Offset, base.HasOffset = name, off, true
				}
			}
		}
		return append(out, base), false
	}
	base.BuildID = e.mod.BuildID()
	base.HasModule = true
	if e.mod.Mismatch() {
		// The file found is not the one mapped: no name from it, ever.
		base.BuildIDMismatch = true
		if build := s.p.BuildIDs[s.maps.FirstOfFile(m).Start]; build != "" {
			base.BuildID = build // the build id the target runs
		}
		base.ModuleOffset = f.PC - m.Start + m.Offset
		return append(out, base), false
	}
	if !e.ok {
		base.ModuleOffset = f.PC - m.Start + m.Offset
		return append(out, base), false
	}
	base.ModuleOffset = f.PC - e.bias
	if e.mod.Mismatch() {
		base.BuildIDMismatch = true
		return append(out, base), false
	}
	syms := e.mod.Lookup(lookup-e.bias, r.syms[:0])
	r.syms = syms
	if len(syms) == 0 {
		return append(out, base), true
	}
	for _, sy := range syms {
		fr := base
		fr.Function, fr.File, fr.Line, fr.Inlined = sy.Function, sy.File, sy.Line, sy.Inlined
		if !sy.Inlined {
			fr.Offset, fr.HasOffset = sy.Offset, sy.Function != ""
			if !f.Exact && !f.SignalFrame && fr.HasOffset {
				fr.Offset++ // the offset of the return address, as gdb prints it
			}
		}
		out = append(out, fr)
	}
	return out, true
}

func rootFor(s *Space, live bool) string {
	if live {
		return rootPath(s.p)
	}
	return ""
}

// Symbolize names one address of the space: its logical frames, innermost
// (inlined) first. exact is false for return addresses (looked up at pc-1).
func (r *Resolver) Symbolize(s *Space, pc uint64, exact bool) []report.Frame {
	return r.userFrame(s, nil, unwind.Frame{PC: pc, Exact: exact})
}

// Namer is Symbolize for the one space s (goruntime.SymbolizerFunc).
func (r *Resolver) Namer(s *Space) func(pc uint64, exact bool) []report.Frame {
	return func(pc uint64, exact bool) []report.Frame { return r.Symbolize(s, pc, exact) }
}

// rootFunctions start threads or goroutines: a walk that ends at one has
// reached the bottom of the stack, whatever the next step found.
var rootFunctions = map[string]bool{
	"_start": true, "clone": true, "__clone": true, "clone3": true, "__clone3": true,
	"runtime.goexit": true, "runtime.mstart": true, "runtime.rt0_go": true, "runtime.mcall": true,
	"runtime.morestack": true, "runtime.clone": true, "runtime.systemstack": true,
	"crosscall1": true, // runtime/cgo's entry from a pthread into Go (its CFI ends the stack)
}

// stackSwitches are Go runtime functions that run on another stack than
// their caller's (g0 or a new goroutine stack): what lies beyond them
// belongs to another stack, so a walk that fails after one is complete as
// far as this thread's own stack goes.
var stackSwitches = map[string]bool{
	"runtime.morestack": true, "runtime.mcall": true, "runtime.systemstack": true,
}

func endsAtRoot(frames []report.Frame) bool {
	last := true
	for i := len(frames) - 1; i >= 0; i-- {
		f := &frames[i]
		if f.Kind != "user" || f.Inlined {
			continue
		}
		// Go's assembly functions are "name.abi0" in ELF symbol tables.
		name := strings.TrimSuffix(f.Function, ".abi0")
		if last && rootFunctions[name] || stackSwitches[name] {
			return true
		}
		last = false
	}
	return false
}

func convSyscall(s *ptrace.Thread) *report.Syscall {
	if s.Syscall == nil || s.Kernel {
		// A kernel thread makes no system calls (captures older than
		// this check carry its syscall file's zeroes, which read as read(0)).
		return nil
	}
	sc := s.Syscall
	out := &report.Syscall{Nr: sc.Nr, Args: sc.Args, SP: sc.SP, PC: sc.PC, Running: sc.Running, InCall: sc.InCall}
	if sc.InCall {
		out.Name = arch.SyscallNameFor(arch.OfRegs(len(s.Regs)), sc.Nr)
	}
	return out
}
