//go:build linux

package sandbox

import (
	"strings"
	"testing"

	"stackshot/report"
)

// rlockWaiters is a report of two threads (1 "a", 2 "b") each waiting
// for an RLock whose owner is not named yet.
func rlockWaiters() *report.Process {
	rp := &report.Process{}
	for i, name := range []string{"a", "b"} {
		rp.Threads = append(rp.Threads, report.Thread{TID: i + 1, Name: name,
			WaitingFor: &report.WaitingFor{Kind: report.WaitPythonRLock, Address: 0x1000 + uint64(i), Note: "asked"}})
	}
	return rp
}

func ptrTo(v int) *int { return &v }

// The parent takes the child's RLock owners only when every one checks
// out: one wait per thread asked, of the kind asked, its owner a thread
// of the process, its note bounded; the owner's name is its own.
func TestJoinRuntimeLocks(t *testing.T) {
	tasks := map[int]bool{1: true, 2: true}
	wait := func(owner int, note string) *report.WaitingFor {
		return &report.WaitingFor{Kind: report.WaitPythonRLock, Address: 0x7f00, OwnerTID: ptrTo(owner), OwnerName: "liar", Note: note}
	}
	for _, c := range []struct {
		name string
		up   upMsg
		err  string
	}{
		{"each other", upMsg{Kind: kRuntimeLocks, WaitTab: []*report.WaitingFor{wait(2, "held"), wait(1, "held")}, WaitOf: []int{0, 1}}, ""},
		{"one unknown", upMsg{Kind: kRuntimeLocks, WaitTab: []*report.WaitingFor{wait(2, "held")}, WaitOf: []int{0, -1}}, ""},
		{"a stranger", upMsg{Kind: kRuntimeLocks, WaitTab: []*report.WaitingFor{wait(2, "held"), wait(99, "held")}, WaitOf: []int{0, 1}}, "owner 99 is no thread"},
		{"another kind", upMsg{Kind: kRuntimeLocks, WaitTab: []*report.WaitingFor{{Kind: report.WaitMutex, OwnerTID: ptrTo(2)}}, WaitOf: []int{0, 0}}, `a "mutex" wait`},
		{"a long note", upMsg{Kind: kRuntimeLocks, WaitTab: []*report.WaitingFor{wait(2, strings.Repeat("x", maxRuntimeNote+100))}, WaitOf: []int{0, -1}}, "-byte note"},
		{"too few", upMsg{Kind: kRuntimeLocks, WaitTab: []*report.WaitingFor{wait(2, "held")}, WaitOf: []int{0}}, "table indexes"},
		{"out of the table", upMsg{Kind: kRuntimeLocks, WaitOf: []int{0, 3}}, "entry"},
		{"another answer", upMsg{Kind: kLocks}, `answer "locks"`},
		{"no runtime", upMsg{Kind: kRuntimeLocks, NotRuntime: true}, "holds no runtime"},
	} {
		rp := rlockWaiters()
		err := joinRuntimeLocks(rp, []int{0, 1}, &c.up, tasks)
		switch {
		case c.err == "" && err != nil, c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
			continue
		case c.err != "":
			for _, th := range rp.Threads {
				if w := th.WaitingFor; w.OwnerTID != nil || w.Address != 0x1000+uint64(th.TID-1) || w.Note != "asked" {
					t.Errorf("%s: refused, yet thread %d's wait became %+v", c.name, th.TID, *w)
				}
			}
			continue
		}
		a := rp.Threads[0].WaitingFor
		if a.OwnerTID == nil || *a.OwnerTID != 2 || a.OwnerName != "b" || a.Address != 0x7f00 || a.Note != "held" {
			t.Errorf("%s: thread 1 waits for %+v, want the RLock at 0x7f00 held by 2 \"b\"", c.name, *a)
		}
		if b := rp.Threads[1].WaitingFor; c.name == "one unknown" && (b.OwnerTID != nil || b.Address != 0x1001) {
			t.Errorf("%s: thread 2's wait changed: %+v", c.name, *b)
		}
	}
}
