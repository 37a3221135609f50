//go:build linux

package sandbox

import (
	"fmt"

	"stackshot/report"
)

// A resolved process's threads mostly share their frames (the same code,
// each thread at its own stack address): the child's kResolve answer
// carries each distinct frame once (its SP zero), and each thread's frames
// as indexes in that table with their SPs. The answer of a 128-thread
// dump was 650 KB of JSON, whose decoding in the parent cost more than
// the child's whole unwinding.

// maxSharedFrames bounds the frames rebuilt from the table: what a
// result of maxUpResult bytes could carry with every frame written out
// (over 256 bytes each), so the table makes no answer larger in memory
// than it could be without it.
const maxSharedFrames = maxUpResult / 256

// shareFrames moves the frames of up.Result's threads into the table.
func shareFrames(up *upMsg) {
	if up.Result == nil {
		return
	}
	ths := up.Result.Threads
	index := map[report.Frame]int{}
	up.FrameOf = make([][]int, len(ths))
	up.FrameSP = make([][]uint64, len(ths))
	for i := range ths {
		fr := ths[i].Frames
		ths[i].Frames = nil
		of, sp := make([]int, len(fr)), make([]uint64, len(fr))
		for k, f := range fr {
			sp[k] = f.SP
			f.SP = 0
			j, ok := index[f]
			if !ok {
				j = len(up.FrameTab)
				index[f] = j
				up.FrameTab = append(up.FrameTab, f)
			}
			of[k] = j
		}
		up.FrameOf[i], up.FrameSP[i] = of, sp
	}
}

// joinFrames gives each thread of up.Result its frames back from the
// table (shareFrames), checking every index. An answer without a table
// keeps the frames it carries.
func joinFrames(up *upMsg) error {
	if up.Result == nil || up.FrameOf == nil && up.FrameSP == nil && up.FrameTab == nil {
		return nil
	}
	ths := up.Result.Threads
	if len(up.FrameOf) != len(ths) || len(up.FrameSP) != len(ths) {
		return fmt.Errorf("frames for %d and %d of %d threads", len(up.FrameOf), len(up.FrameSP), len(ths))
	}
	total := 0
	for i := range ths {
		if len(up.FrameOf[i]) != len(up.FrameSP[i]) || len(ths[i].Frames) != 0 {
			return fmt.Errorf("thread %d: %d frames, %d stack pointers", i, len(up.FrameOf[i]), len(up.FrameSP[i]))
		}
		total += len(up.FrameOf[i])
		if total > maxSharedFrames {
			return fmt.Errorf("over %d frames", maxSharedFrames)
		}
	}
	for i := range ths {
		of := up.FrameOf[i]
		if len(of) == 0 {
			continue
		}
		fr := make([]report.Frame, len(of))
		for k, j := range of {
			if j < 0 || j >= len(up.FrameTab) {
				return fmt.Errorf("thread %d: frame %d of %d", i, j, len(up.FrameTab))
			}
			fr[k] = up.FrameTab[j]
			fr[k].SP = up.FrameSP[i][k]
		}
		ths[i].Frames = fr
	}
	up.FrameTab, up.FrameOf, up.FrameSP = nil, nil, nil
	return nil
}
