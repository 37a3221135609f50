package resolve

import (
	"stackshot/ptrace"
	"stackshot/report"
)

// Unnamed is a capture shown without unwinding or symbolization (their
// parser failed, see package sandbox): each thread with what needs no
// parsing (its state, syscall, kernel frames as the kernel named them when
// kernel is set) and one user frame, the PC of its registers (or of its
// syscall), unnamed; why is each thread's error.
func Unnamed(p *ptrace.Process, kernel bool, why string) *report.Process {
	out := &report.Process{PID: p.PID, Comm: p.Comm, Exe: p.Exe, Time: p.Time, State: p.State,
		Warnings: p.Warnings, WallNS: p.WallNS}
	for i := range p.Threads {
		th := &p.Threads[i]
		t := Head(th)
		if t.Error == "" {
			t.Error = why
		}
		if kernel {
			for _, k := range th.KernelStack {
				t.Frames = append(t.Frames, report.Frame{PC: k.Addr, Kind: "kernel", Function: k.Function,
					Offset: k.Offset, HasOffset: k.Function != "", Method: "kernel"})
			}
		}
		pc := th.PC()
		if pc != 0 {
			t.Frames = append(t.Frames, report.Frame{PC: pc, Kind: "user", Method: "regs"})
		}
		out.Threads = append(out.Threads, t)
	}
	return out
}
