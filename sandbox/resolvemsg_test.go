//go:build linux

package sandbox

import (
	"reflect"
	"slices"
	"testing"

	"stackshot/procmaps"
	"stackshot/ptrace"
)

// A kResolve request carries each distinct kernel stack once, and the
// child gives every thread its own back; it refuses indexes that do not
// fit, and a request that leans on a space it does not have.
func TestKernelStacksShared(t *testing.T) {
	futex := []procmaps.KernelFrame{{Function: "futex_wait", Offset: 0x7d, Size: 0xd0}, {Function: "do_syscall_64", Offset: 0x71}}
	pipe := []procmaps.KernelFrame{{Function: "pipe_read", Offset: 0x397}, {Function: "do_syscall_64", Offset: 0x71}}
	hidden := []procmaps.KernelFrame{{Addr: 0xffffffff81000130}}
	threads := func() []ptrace.Thread {
		return []ptrace.Thread{
			{TID: 1, KernelStack: futex}, {TID: 2, KernelStack: futex}, {TID: 3},
			{TID: 4, KernelStack: pipe}, {TID: 5, KernelStack: slices.Clone(futex)}, {TID: 6, KernelStack: hidden},
		}
	}
	ths := threads()
	tab, of := shareKernelStacks(ths)
	if len(tab) != 3 || !reflect.DeepEqual(of, []int{0, 0, -1, 1, 0, 2}) {
		t.Errorf("table of %d, indexes %v; want 3, [0 0 -1 1 0 2]", len(tab), of)
	}
	for _, th := range ths {
		if th.KernelStack != nil {
			t.Fatalf("thread %d still carries its kernel stack", th.TID)
		}
	}
	m := &downMsg{Kind: kResolve, Proc: &ptrace.Process{Threads: ths}, KStacks: tab, KStackOf: of}
	if !restoreRequest(m, nil) {
		t.Fatal("refused")
	}
	if want := threads(); !reflect.DeepEqual(m.Proc.Threads, want) {
		t.Errorf("restored %+v\nwant %+v", m.Proc.Threads, want)
	}
	m.Proc.Threads[0].KernelStack[0].Addr = 1
	if m.Proc.Threads[1].KernelStack[0].Addr != 0 {
		t.Error("two threads share one kernel stack's frames")
	}

	for name, edit := range map[string]func(*downMsg){
		"index past the table": func(m *downMsg) { m.KStackOf[3] = 3 },
		"negative index":       func(m *downMsg) { m.KStackOf[3] = -2 },
		"a thread missing":     func(m *downMsg) { m.KStackOf = m.KStackOf[:5] },
		"no space to share":    func(m *downMsg) { m.SameSpace = true },
	} {
		ths := threads()
		tab, of := shareKernelStacks(ths)
		m := &downMsg{Kind: kResolve, Proc: &ptrace.Process{Threads: ths}, KStacks: tab, KStackOf: of}
		edit(m)
		if restoreRequest(m, nil) {
			t.Errorf("%s: accepted", name)
		}
	}

	// SameSpace: the space's maps, build ids, vdso and auxv.
	space := &ptrace.Process{Maps: []procmaps.Mapping{{Start: 0x1000, End: 0x2000, Path: "/bin/x"}},
		BuildIDs: map[uint64]string{0x1000: "ab"}, VDSO: []byte{1}, Auxv: []byte{2}}
	m = &downMsg{Kind: kResolve, Proc: &ptrace.Process{PID: 7}, SameSpace: true}
	if !restoreRequest(m, space) || !reflect.DeepEqual(m.Proc.Maps, space.Maps) || m.Proc.BuildIDs[0x1000] != "ab" ||
		string(m.Proc.VDSO) != "\x01" || string(m.Proc.Auxv) != "\x02" {
		t.Errorf("SameSpace: %+v", m.Proc)
	}
}

// The parent leaves the space out only while it is the capture's as sent.
func TestSameSpace(t *testing.T) {
	p := &ptrace.Process{PID: 7, Maps: []procmaps.Mapping{{Start: 0x1000, End: 0x2000, Path: "/bin/x"}},
		BuildIDs: map[uint64]string{0x1000: "ab"}, VDSO: []byte{1}}
	var c Child
	if c.sameSpace(p) {
		t.Error("no space yet, and the same")
	}
	c.setSpace(p, p.Maps)
	if !c.sameSpace(p) {
		t.Error("just set, and not the same")
	}
	q := *p
	if c.sameSpace(&q) {
		t.Error("another capture with equal maps, and the same")
	}
	p.BuildIDs[0x1000] = "cd"
	if c.sameSpace(p) {
		t.Error("a build id changed, and the same")
	}
	p.BuildIDs[0x1000] = "ab"
	p.Maps = append(p.Maps, procmaps.Mapping{Start: 0x3000, End: 0x4000})
	if c.sameSpace(p) {
		t.Error("a mapping added, and the same")
	}
}
