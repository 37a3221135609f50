package ptrace

import (
	"reflect"
	"testing"
)

func TestKeepThreads(t *testing.T) {
	p := &Process{Threads: []Thread{{TID: 10}, {TID: 11}, {TID: 12}}}
	if m := p.KeepThreads(nil); m != nil || len(p.Threads) != 3 {
		t.Fatalf("no tids: missing %v, %d threads", m, len(p.Threads))
	}
	missing := p.KeepThreads([]int{12, 99, 10, 99})
	var got []int
	for _, th := range p.Threads {
		got = append(got, th.TID)
	}
	if !reflect.DeepEqual(got, []int{10, 12}) || !reflect.DeepEqual(missing, []int{99}) {
		t.Errorf("kept %v, missing %v; want [10 12], [99]", got, missing)
	}
}
