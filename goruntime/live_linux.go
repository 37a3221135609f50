//go:build linux

package goruntime

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
)

// Live reads the goroutines of a live process into rp, after every thread
// of the capture p runs again: no ptrace stop, only memory reads, until
// deadline or cancel. sym names the frames (the resolver that named the
// threads, so both agree). A process that is not a Go program is left as
// it is; one whose goroutines cannot be read gets rp.Runtime and a warning
// saying why, and rp.Goroutines nil.
func Live(p *ptrace.Process, rp *report.Process, sym Symbolizer, deadline time.Time, cancel <-chan struct{}) {
	f := OpenExe(p)
	if f == nil {
		return
	}
	defer f.Close()
	LiveFrom(p, rp, sym, ptrace.MemReader{PID: p.MemPID()}, f, deadline, cancel)
}

// OpenExe opens the executable of a live process whose goroutines are to
// be read (/proc/PID/exe of the thread its memory is read through), or
// returns nil when it has none mapped or it cannot be opened. Opening
// parses nothing: a sandboxed child is handed the file (LiveFrom).
func OpenExe(p *ptrace.Process) *os.File {
	if exeMapping(p) == nil {
		return nil
	}
	f, err := os.Open(fmt.Sprintf("%s/%d/exe", procmaps.Proc, p.MemPID()))
	if err != nil {
		return nil
	}
	return f
}

// exeMapping is the lowest mapping of the executable.
func exeMapping(p *ptrace.Process) *procmaps.Mapping {
	var exe *procmaps.Mapping
	for i := range p.Maps {
		m := &p.Maps[i]
		if m.Kind == procmaps.KindFile && m.Path == p.Exe && (exe == nil || m.Start < exe.Start) {
			exe = m
		}
	}
	return exe
}

// LiveFrom is Live with the process's memory and its executable (see
// OpenExe) given: what a sandboxed child, which can open nothing, does.
// mem must read the memory as it is now at each call (no cache: a
// goroutine is validated by reading it twice).
func LiveFrom(p *ptrace.Process, rp *report.Process, sym Symbolizer, mem io.ReaderAt, f *os.File, deadline time.Time, cancel <-chan struct{}) {
	exe := exeMapping(p)
	if exe == nil {
		return
	}
	bias, ok := LoadBias(f, exe.Start, exe.Offset)
	if !ok {
		return
	}
	rt, err := Open(Target{Mem: mem, Exe: f, Bias: bias})
	var unknown *UnknownVersionError
	switch {
	case errors.Is(err, ErrNotGo):
		return
	case errors.As(err, &unknown):
		rp.Runtime = &report.Runtime{Name: "go", Version: unknown.Version}
		rp.Warnings = append(rp.Warnings, unknown.Error())
		return
	case err != nil:
		rp.Runtime = &report.Runtime{Name: "go"}
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("goroutines not read (%v)", err))
		return
	}
	rp.Runtime = &report.Runtime{Name: "go", Version: rt.Version}
	rt.Deadline, rt.Cancel = deadline, cancel
	snap, err := rt.Goroutines()
	if err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("goroutines not read (%v)", err))
		return
	}
	// waiting_s is measured on the runtime's clock, CLOCK_MONOTONIC.
	var ts unix.Timespec
	now := int64(0)
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
		now = ts.Nano()
	}
	rp.Goroutines = snap.Report(sym, now, rp.Threads)
	rp.GoroutinesSkipped = snap.Skipped
	if snap.Skipped > 0 {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("goroutines not shown: %d changed while they were read", snap.Skipped))
	}
}
