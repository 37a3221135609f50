//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"

	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
)

// The child's kResolve answer carries only what unwinding found. The rest
// of each thread's report (its id, name, state, system call, how it was
// captured: resolve.Head) the parent has already, in the capture it sent,
// and builds itself. Threads mostly share their frames (the same code,
// each thread at its own stack address): each distinct frame travels once,
// in a table (its SP zero), and each thread's frames as indexes in it with
// their SPs, packed in bytes.
//
// The answer of a 512-thread dump was 273 KB of JSON, each thread's header
// and numbers written out, and decoding it cost the parent 4 ms, more than
// the child's whole unwinding.

// maxSharedFrames bounds the frames rebuilt from the table: what a
// result of maxUpResult bytes could carry with every frame written out
// (over 256 bytes each), so the table makes no answer larger in memory
// than it could be without it.
const maxSharedFrames = maxUpResult / 256

// unwound is what unwinding adds to a thread's head.
type unwound struct {
	Error string
	Stop  string
	// A JavaThread's name and state, read from the JVM as its frames are.
	JavaName, JavaState string
}

// shareFrames moves what unwinding found for up.Result's threads into
// up.Unwound, up.FrameTab and up.FrameRefs, and drops the threads.
//
// FrameRefs holds, for each thread, its frame count, then per frame its
// index in the table and its SP less the previous frame's (the first's
// less zero), as varints.
func shareFrames(up *upMsg) {
	if up.Result == nil {
		return
	}
	ths := up.Result.Threads
	// The table's frames by PC: most PCs have one frame (an inlined call
	// more), and comparing those is cheaper than hashing whole frames, a
	// millisecond for a 512-thread dump.
	byPC := map[uint64][]int{}
	up.Unwound = make([]unwound, len(ths))
	up.FrameRefs = []byte{}
	for i := range ths {
		up.Unwound[i] = unwound{Error: ths[i].Error, Stop: ths[i].Stop, JavaName: ths[i].JavaName, JavaState: ths[i].JavaState}
		fr := ths[i].Frames
		up.FrameRefs = binary.AppendUvarint(up.FrameRefs, uint64(len(fr)))
		var prev uint64
		for _, f := range fr {
			sp := f.SP
			f.SP = 0
			j := -1
			for _, k := range byPC[f.PC] {
				if up.FrameTab[k] == f {
					j = k
					break
				}
			}
			if j < 0 {
				j = len(up.FrameTab)
				byPC[f.PC] = append(byPC[f.PC], j)
				up.FrameTab = append(up.FrameTab, f)
			}
			up.FrameRefs = binary.AppendUvarint(up.FrameRefs, uint64(j))
			up.FrameRefs = binary.AppendVarint(up.FrameRefs, int64(sp-prev))
			prev = sp
		}
	}
	up.Result.Threads = nil
}

// joinFrames gives up.Result the threads of p, the capture the child
// resolved: each thread's head built here (resolve.Head), with what the
// child's unwinding found (shareFrames), every count and index checked.
// Threads the child writes out itself are refused: a thread's id, name,
// state and system call are the parent's own capture, never the child's
// word.
func joinFrames(up *upMsg, p *ptrace.Process) error {
	if up.Result == nil {
		return nil
	}
	if len(up.Result.Threads) != 0 {
		return fmt.Errorf("%d threads sent besides their frames", len(up.Result.Threads))
	}
	if len(up.Unwound) != len(p.Threads) {
		return fmt.Errorf("frames for %d of %d threads", len(up.Unwound), len(p.Threads))
	}
	counts, refs, err := readRefs(up.FrameRefs, len(p.Threads), len(up.FrameTab))
	if err != nil {
		return err
	}
	// One array holds every thread's frames, each thread's slice capped at
	// its own.
	all := make([]report.Frame, len(refs))
	for k, r := range refs {
		all[k] = up.FrameTab[r.index]
		all[k].SP = r.sp
	}
	ths := make([]report.Thread, len(p.Threads))
	at := 0
	for i := range ths {
		ths[i] = resolve.Head(&p.Threads[i])
		ths[i].Error, ths[i].Stop = up.Unwound[i].Error, up.Unwound[i].Stop
		ths[i].JavaName, ths[i].JavaState = up.Unwound[i].JavaName, up.Unwound[i].JavaState
		if n := counts[i]; n > 0 {
			ths[i].Frames = all[at : at+n : at+n]
			at += n
		}
	}
	up.Result.Threads = ths
	up.Unwound, up.FrameTab, up.FrameRefs = nil, nil, nil
	return nil
}

type frameRef struct {
	index int
	sp    uint64
}

// readRefs decodes FrameRefs (shareFrames) for threads threads and a table
// of tab frames: each thread's frame count, and all their frames in order.
func readRefs(b []byte, threads, tab int) (counts []int, refs []frameRef, err error) {
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	counts = make([]int, threads)
	for i := range counts {
		n, ok := next()
		// Each frame takes two bytes at least.
		if !ok || n > uint64(len(b)/2) {
			return nil, nil, fmt.Errorf("thread %d: frame count cut short or past the answer", i)
		}
		if uint64(len(refs))+n > maxSharedFrames {
			return nil, nil, fmt.Errorf("over %d frames", maxSharedFrames)
		}
		counts[i] = int(n)
		var sp uint64
		for range n {
			j, ok := next()
			if !ok || j >= uint64(tab) {
				return nil, nil, fmt.Errorf("thread %d: frame %d of %d", i, int64(j), tab)
			}
			d, m := binary.Varint(b)
			if m <= 0 {
				return nil, nil, fmt.Errorf("thread %d: stack pointer cut short", i)
			}
			b = b[m:]
			sp += uint64(d)
			refs = append(refs, frameRef{int(j), sp})
		}
	}
	if len(b) != 0 {
		return nil, nil, fmt.Errorf("%d bytes after the last thread's frames", len(b))
	}
	return counts, refs, nil
}
