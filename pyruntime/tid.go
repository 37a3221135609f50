package pyruntime

import (
	"encoding/binary"
	"slices"
)

// pthreadScan is how much of glibc's struct pthread is searched for its
// tid member.
const pthreadScan = 1024

// MatchTIDs fills the NativeID of threads that lack one (CPython before
// 3.11 records only thread_id, the pthread_t: the address of glibc's
// struct pthread, which holds the thread's tid). The tid member's offset
// is not assumed: it is the one at which every such thread's struct holds
// a distinct one of tids. No such offset, or two that disagree: left
// unknown.
func (rt *Runtime) MatchTIDs(threads []Thread, tids map[int]bool) {
	var need []int
	var mem [][]byte
	for i := range threads {
		if threads[i].NativeID != 0 || threads[i].ThreadID == 0 {
			continue
		}
		b := make([]byte, pthreadScan)
		if _, err := rt.Mem.ReadAt(b, int64(threads[i].ThreadID)); err != nil {
			return
		}
		need, mem = append(need, i), append(mem, b)
	}
	if len(need) == 0 {
		return
	}
	var found []int
	for off := 0; off+4 <= pthreadScan; off += 4 {
		got := map[int]bool{}
		var ids []int
		for _, b := range mem {
			id := int(int32(binary.LittleEndian.Uint32(b[off:])))
			if !tids[id] || got[id] {
				break
			}
			got[id] = true
			ids = append(ids, id)
		}
		if len(ids) != len(need) {
			continue
		}
		if found != nil && !slices.Equal(found, ids) {
			return // two offsets, two answers: none believed
		}
		found = ids
	}
	for k, i := range need {
		if found != nil {
			threads[i].NativeID = found[k]
		}
	}
}
