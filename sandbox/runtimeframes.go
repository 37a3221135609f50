//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"unicode/utf8"

	"stackshot/goruntime"
	"stackshot/internal/contain"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
)

// A runtime's frames (kRuntime): the frames of an interpreter a live
// target runs (CPython's now), read from its memory in the child and put
// in the threads' stacks there, as pyruntime.ReadInto does in-process.
// One request serves every runtime: downMsg.Runtime names which.

// runtimePython is the runtime kRuntime reads CPython's frames of.
const runtimePython = "python"

// maxRuntimeVersion bounds a runtime's version the child gives.
const maxRuntimeVersion = 64

// RuntimeFrames reads the frames of the runtime name ("python") the live
// target p runs into rp (p's report as Resolve gave it), in the child: the
// parent opens each of cands (the mapped files that may hold it, through
// /proc/PID/map_files) and hands it over with the request, the child
// parses the file and the runtime's structures from the target's memory
// and answers with rp's threads, the runtime's frames placed among the
// native ones, and the warnings. It returns the mapping of cands whose
// file holds the runtime when its frames were read (nil: none of cands
// has it, or the child failed, which rp's warnings say), for
// RuntimeLocks. What the child answers is checked: the same threads, in
// the same order, each with its native frames' count bounded and its
// threading name (Python) at most pyruntime.MaxName bytes of UTF-8.
func (c *Child) RuntimeFrames(p *ptrace.Process, rp *report.Process, name string, cands []*procmaps.Mapping) *procmaps.Mapping {
	if c.dead != nil || !c.cfg.Resolve.Live {
		return nil
	}
	c.keepOwed(rp) // (the lock owners and goroutines it resolved with)
	c.follow(p)
	head := *p
	head.Threads = nil
	b := encodeReport(&report.Process{Threads: rp.Threads})
	for _, m := range cands {
		f, _, err := procmaps.OpenMapped(p.MemPID(), m)
		if err != nil {
			continue
		}
		mapping := *m
		up, err := c.roundTripFD(&downMsg{Kind: kRuntime, Proc: &head, Report: b, Runtime: name, Mapping: &mapping}, int(f.Fd()), c.killAt())
		f.Close()
		if err == nil && up.NotRuntime {
			continue
		}
		if err == nil {
			err = joinRuntime(rp, up, name)
		}
		if err != nil {
			rp.Warnings = append(rp.Warnings, fmt.Sprintf("%s frames not read: the sandboxed parser failed (%v)", name, err))
			return nil
		}
		if !up.RuntimeRead {
			return nil
		}
		return m
	}
	return nil
}

// joinRuntime puts the child's answer to kRuntime into rp, once it
// checks out.
func joinRuntime(rp *report.Process, up *upMsg, name string) error {
	res := up.Result
	if up.Kind != kRuntime || res == nil {
		return fmt.Errorf("no frames (%s)", up.Err)
	}
	if len(res.Threads) != len(rp.Threads) {
		return fmt.Errorf("%d threads answered for %d", len(res.Threads), len(rp.Threads))
	}
	for i := range res.Threads {
		t, a := &rp.Threads[i], &res.Threads[i]
		if a.TID != t.TID {
			return fmt.Errorf("thread %d answered for thread %d", a.TID, t.TID)
		}
		if len(a.Frames) > len(t.Frames)+pyruntime.MaxFrames {
			return fmt.Errorf("thread %d: %d frames", t.TID, len(a.Frames))
		}
		if len(a.PythonName) > pyruntime.MaxName || !utf8.ValidString(a.PythonName) {
			return fmt.Errorf("thread %d: a %d-byte Python name", t.TID, len(a.PythonName))
		}
	}
	var rts []report.Runtime
	if res.Runtime != nil {
		rts = append(rts, *res.Runtime)
	}
	if len(res.Runtimes) > 0 {
		rts = res.Runtimes
	}
	if len(rts) != 1 || rts[0].Name != name || len(rts[0].Version) > maxRuntimeVersion {
		return fmt.Errorf("runtime %v", rts)
	}
	for i := range res.Threads {
		t, a := &rp.Threads[i], &res.Threads[i]
		t.Frames = a.Frames
		t.HoldsGIL = t.HoldsGIL || a.HoldsGIL
		t.PythonName = a.PythonName
	}
	rp.AddRuntime(report.Runtime{Name: name, Version: rts[0].Version})
	rp.Warnings = append(rp.Warnings, res.Warnings...)
	return nil
}

// runtimeFrames answers kRuntime in the child: the frames of m.Runtime
// read from the target's memory and the file f (m.Mapping's, handed over
// by the parent, closed here) into m's report, which comes back with only
// its threads, runtime and new warnings (read: its frames were read, not
// only its version); (nil, true): f holds no such runtime.
func runtimeFrames(m *downMsg, memc *memClient, f *os.File) (out *report.Process, notRuntime, read bool) {
	defer f.Close()
	st, err := f.Stat()
	if m.Runtime != runtimePython || memc == nil || err != nil {
		return nil, true, false
	}
	bias, ok := goruntime.LoadBias(f, m.Mapping.Start, m.Mapping.Offset)
	if !ok {
		return nil, true, false
	}
	out = &report.Process{Threads: m.report.Threads}
	mod := pyruntime.Module{Path: m.Mapping.Path, File: f, Size: st.Size(), Bias: bias}
	if err := contain.Call("reading Python frames", func() {
		var rt *pyruntime.Runtime
		rt, _, notRuntime = pyruntime.ReadInto(out, func() (*pyruntime.Runtime, error) {
			return pyruntime.Open(memc.direct(), []pyruntime.Module{mod})
		})
		read = rt != nil
	}); err != nil {
		return nil, false, false // (the parent says it failed)
	}
	if notRuntime {
		return nil, true, false
	}
	return &report.Process{Threads: out.Threads, Runtime: out.Runtime, Runtimes: out.Runtimes, Warnings: out.Warnings}, false, read
}
