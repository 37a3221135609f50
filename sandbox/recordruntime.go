//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"

	"stackshot/goruntime"
	"stackshot/internal/contain"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/resolve"
	"stackshot/symtab"
)

// record's runtime frames: the child opens a target's CPython interpreter
// once (kRecordRuntime, its file handed over as for kRuntime) and keeps it
// for that process (its pid and start time); each tick's kRecord then asks
// for the Python frames of the threads it walks, in the same round trip.
// What comes back is checked here: one answer per thread walked, each
// bounded in frames and in the length of its names.

// maxRuntimeName bounds a Python frame's function or file name in the
// child's answer, in bytes (pyruntime reads at most 4096 characters).
const maxRuntimeName = 4 * 4096

// OpenRuntime has the child open the interpreter of the runtime name
// ("python") that target p (id: its pid and start time) runs, for the
// walks that follow (Walk then returns each thread's runtime frames). The
// parent opens each of cands (through /proc/PID/map_files) and hands it
// over, until the child finds the runtime in one: its version. ("",
// nil): none of cands holds it. An error: the child found it but cannot
// read it (an unknown version), or failed.
func (w *Walker) OpenRuntime(p *ptrace.Process, id procmaps.Identity, name string, cands []*procmaps.Mapping) (string, error) {
	c := w.c
	w.runtime = ""
	if c.dead != nil || !c.cfg.Resolve.Live {
		return "", nil
	}
	c.follow(p)
	head := *p
	head.Threads = nil
	for _, m := range cands {
		f, _, err := procmaps.OpenMapped(p.MemPID(), m)
		if err != nil {
			continue
		}
		mapping := *m
		up, err := c.roundTripFD(&downMsg{Kind: kRecordRuntime, Proc: &head, Runtime: name, Mapping: &mapping, Target: id}, int(f.Fd()), c.killAt())
		f.Close()
		switch {
		case err != nil:
			return "", fmt.Errorf("the sandboxed parser failed (%v)", err)
		case up.Kind != kRecordRuntime:
			return "", fmt.Errorf("the sandboxed parser failed (unexpected %q)", up.Kind)
		case up.NotRuntime:
			continue
		case up.Err != "":
			return "", errors.New(up.Err)
		case len(up.Text) > maxRuntimeVersion:
			return "", fmt.Errorf("the sandboxed parser failed (a %d-byte version)", len(up.Text))
		}
		w.runtime, w.target = name, id
		return up.Text, nil
	}
	return "", nil
}

// unpackRuntime checks and reads the runtime frames of the child's answer
// for n threads into w.walks: none at all (not asked, or not read this
// tick), or one count per thread.
func (w *Walker) unpackRuntime(up *upMsg, n int) error {
	if len(up.RtCounts) == 0 && len(up.RtFrames) == 0 {
		return nil
	}
	if len(up.RtCounts) != n || len(up.RtGIL) != n {
		return fmt.Errorf("runtime frames of %d threads for %d", len(up.RtCounts), n)
	}
	fs := up.RtFrames
	w.pys = w.pys[:0]
	for i := 0; i < n; i++ {
		k := up.RtCounts[i]
		if k > uint64(len(fs)) || k > pyruntime.MaxFrames {
			return fmt.Errorf("thread %d: %d runtime frames", i, k)
		}
		for _, f := range fs[:k] {
			if len(f.Name) > maxRuntimeName || len(f.QualName) > maxRuntimeName || len(f.File) > maxRuntimeName || f.Line < 0 {
				return fmt.Errorf("thread %d: a malformed runtime frame", i)
			}
		}
		w.pys = append(w.pys, pyruntime.Thread{NativeID: w.ths[i].TID, HoldsGIL: up.RtGIL[i], Frames: fs[:k:k]})
		fs = fs[k:]
	}
	if len(fs) != 0 {
		return fmt.Errorf("%d runtime frames past %d threads", len(fs), n)
	}
	for i := range w.walks {
		if len(w.pys[i].Frames) > 0 || w.pys[i].HoldsGIL {
			w.walks[i].Python = &w.pys[i]
		}
	}
	return nil
}

// serve answers record's requests in the child: kRecord (a tick's walks,
// and its runtime frames) and kRecordRuntime (fd: the file handed over);
// false: a malformed request.
func (st *walking) serve(cfg *setup, sym *symtab.Symbolizer, mem io.ReaderAt, memc *memClient, m *downMsg, fd int) (up upMsg, ok bool) {
	hookBefore(cfg.Hook, m.Kind)
	if m.Kind == kRecordRuntime {
		if m.Mapping == nil || fd < 0 {
			return up, false
		}
		return st.openRuntime(m, memc, os.NewFile(uintptr(fd), "runtime")), true
	}
	if up, ok = st.walkTick(func() *resolve.Resolver { return samplingResolver(cfg, sym) }, mem, m); !ok {
		return up, false
	}
	st.runtimeTick(m, &up)
	up.Expired, up.Budget = sym.Expired(), sym.BudgetExceeded()
	return up, true
}

// openRuntime answers kRecordRuntime in the child: the interpreter in
// file f (m.Mapping's, closed here), kept for m.Target's walks.
func (st *walking) openRuntime(m *downMsg, memc *memClient, f *os.File) (up upMsg) {
	defer f.Close()
	up.Kind = kRecordRuntime
	info, err := f.Stat()
	if m.Runtime != runtimePython || memc == nil || err != nil {
		up.NotRuntime = true
		return up
	}
	bias, ok := goruntime.LoadBias(f, m.Mapping.Start, m.Mapping.Offset)
	if !ok {
		up.NotRuntime = true
		return up
	}
	mod := pyruntime.Module{Path: m.Mapping.Path, File: f, Size: info.Size(), Bias: bias}
	var rt *pyruntime.Runtime
	if perr := contain.Call("opening the Python interpreter", func() { rt, err = pyruntime.Open(memc.direct(), []pyruntime.Module{mod}) }); perr != nil {
		err = perr
	}
	switch {
	case errors.Is(err, pyruntime.ErrNotPython):
		up.NotRuntime = true
	case err != nil:
		up.Err = err.Error()
	default:
		st.rt, st.rtKey, up.Text = rt, m.Target, rt.Version
	}
	return up
}

// runtimeTick adds to a kRecord answer the Python frames of each of
// m.Threads (m.Tasks: every thread of the target, which the thread states
// are matched against), when m asks for them of the process whose
// interpreter the child keeps.
func (st *walking) runtimeTick(m *downMsg, up *upMsg) {
	if m.Runtime != runtimePython || st.rt == nil || m.Target != st.rtKey {
		return
	}
	tids := make(map[int]bool, len(m.Tasks))
	for _, tid := range m.Tasks {
		tids[tid] = true
	}
	var by map[int]*pyruntime.Thread
	if err := contain.Call("reading Python frames", func() {
		threads, _ := st.rt.Threads()
		by = pyruntime.ByTID(st.rt, threads, tids)
	}); err != nil {
		return
	}
	for i := range m.Threads {
		pt := by[m.Threads[i].TID]
		if pt == nil {
			up.RtCounts, up.RtGIL = append(up.RtCounts, 0), append(up.RtGIL, false)
			continue
		}
		fs := pt.Frames[:min(len(pt.Frames), pyruntime.MaxFrames)]
		up.RtCounts, up.RtGIL = append(up.RtCounts, uint64(len(fs))), append(up.RtGIL, pt.HoldsGIL)
		up.RtFrames = append(up.RtFrames, fs...)
	}
}
