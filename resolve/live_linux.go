//go:build linux

package resolve

import (
	"stackshot/internal/arch"
	"stackshot/procmaps"
	"stackshot/ptrace"
)

// CaptureLive takes one raw snapshot of a live process, with what a saved
// capture needs besides (build ids, the vdso). In auto mode a thread read
// without a stop whose stack does not unwind completely is read again with
// a stop.
func (r *Resolver) CaptureLive(pid int, opt ptrace.Options) (*ptrace.Process, error) {
	var space *Space
	check := func(p *ptrace.Process, th *ptrace.Thread) bool {
		if space == nil {
			mem := ptrace.MemReader{PID: p.MemPID()}
			CollectImages(p, mem)
			space = r.Space(p, mem)
		}
		return space.CheckNoStop(th)
	}
	p, err := ptrace.Capture(pid, opt, check)
	if err != nil {
		return nil, err
	}
	if p.BuildIDs == nil {
		CollectImages(p, ptrace.MemReader{PID: p.MemPID()})
	}
	return p, nil
}

// LiveSpace is a live process's address space read from its maps and
// memory, without a stop: for naming addresses (Symbolize).
func (r *Resolver) LiveSpace(pid int) (*Space, error) {
	maps, err := procmaps.ReadMaps(pid)
	if err != nil {
		return nil, err
	}
	p := &ptrace.Process{Arch: arch.Host, PID: pid, Maps: maps}
	mem := ptrace.MemReader{PID: pid}
	CollectImages(p, mem)
	return r.Space(p, mem), nil
}
