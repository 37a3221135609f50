//go:build linux

package sandbox

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"

	"stackshot/procmaps"
	"stackshot/ptrace"
)

// A kResolve request sends the capture without what the child has
// already, and with its threads' kernel stacks each sent once:
//   - the stacks a kCheckAll sent (withoutChecked, batch.go);
//   - the maps, build ids, vdso and auxv of the process its checks unwind
//     in, when they are still the capture's (SameSpace);
//   - each distinct kernel stack once (KStacks), with each thread's index
//     in them (KStackOf): a pool's threads wait in the same place.
//
// A 512-thread dump's request was 172 KB of gob, half of it the same
// seven kernel frames over and over, and took the parent and the child
// 2.5 ms to encode and decode.

// spaceHead is what the parent sent, or learnt from the child, of the
// process its checks unwind in.
type spaceHead struct {
	maps     []procmaps.Mapping
	buildIDs map[uint64]string
	vdso     []byte
	auxv     []byte
}

// setSpace records that p is now the process the child's checks unwind
// in, as p is now but for its maps, which the child has as ms (p's when
// sent just now; a capture may read them again after sending them).
func (c *Child) setSpace(p *ptrace.Process, ms []procmaps.Mapping) {
	c.space = p
	c.spaceHead = spaceHead{slices.Clone(ms), maps.Clone(p.BuildIDs), slices.Clone(p.VDSO), slices.Clone(p.Auxv)}
}

// sameSpace reports whether p is the process of the child's checks, its
// maps, build ids, vdso and auxv unchanged since.
func (c *Child) sameSpace(p *ptrace.Process) bool {
	h := &c.spaceHead
	return c.space == p && slices.Equal(h.maps, p.Maps) && maps.Equal(h.buildIDs, p.BuildIDs) &&
		bytes.Equal(h.vdso, p.VDSO) && bytes.Equal(h.auxv, p.Auxv)
}

// resolveRequest fills kResolve m with p as it is sent.
func (c *Child) resolveRequest(m *downMsg, p *ptrace.Process) {
	same := c.sameSpace(p)
	q, kept := c.withoutChecked(p)
	if q == p {
		x := *p
		x.Threads = slices.Clone(p.Threads)
		q = &x
	}
	if same {
		q.Maps, q.BuildIDs, q.VDSO, q.Auxv = nil, nil, nil, nil
	}
	m.Proc, m.Kept, m.SameSpace = q, kept, same
	m.KStacks, m.KStackOf = shareKernelStacks(q.Threads)
}

// shareKernelStacks moves the kernel stacks of ths into a table of the
// distinct ones, and returns it with each thread's index in it (-1: none).
func shareKernelStacks(ths []ptrace.Thread) ([][]procmaps.KernelFrame, []int) {
	stacks := make([][]procmaps.KernelFrame, len(ths))
	for i := range ths {
		stacks[i], ths[i].KernelStack = ths[i].KernelStack, nil
	}
	var key []byte
	return tabulate(stacks, func(ks []procmaps.KernelFrame) (string, bool) {
		key = key[:0]
		for _, f := range ks {
			key = append(key, f.Function...)
			key = append(key, 0)
			key = binary.LittleEndian.AppendUint64(key, f.Addr)
			key = binary.LittleEndian.AppendUint64(key, f.Offset)
			key = binary.LittleEndian.AppendUint64(key, f.Size)
		}
		return string(key), len(ks) > 0
	})
}

// restoreRequest undoes resolveRequest in the child, but for the stacks
// (restoreChecked): the space's maps, build ids, vdso and auxv (space: the
// process the checks unwind in) and each thread's kernel stack. false: m
// does not fit.
func restoreRequest(m *downMsg, space *ptrace.Process) bool {
	p := m.Proc
	if m.SameSpace {
		if space == nil {
			return false
		}
		p.Maps, p.BuildIDs, p.VDSO, p.Auxv = space.Maps, space.BuildIDs, space.VDSO, space.Auxv
	}
	if m.KStackOf == nil {
		return true
	}
	// Each thread its own copy, as the capture had them: no thread's
	// frames are tied to another's.
	return untabulate(m.KStacks, m.KStackOf, len(p.Threads), "thread", func(i int, ks []procmaps.KernelFrame) {
		p.Threads[i].KernelStack = slices.Clone(ks)
	}) == nil
}
