package report

import (
	"reflect"
	"testing"
)

func TestGroupGoroutines(t *testing.T) {
	fr := func(names ...string) []Frame {
		var out []Frame
		for i, n := range names {
			out = append(out, Frame{PC: uint64(0x1000 + i), Kind: "user", Function: n})
		}
		return out
	}
	a := fr("runtime.gopark", "main.worker", "runtime.goexit")
	b := fr("runtime.gopark", "main.worker", "runtime.goexit")
	b[0].PC = 0x2000 // same functions, another address: same group
	c := fr("runtime.gopark", "main.other", "runtime.goexit")
	gs := []Goroutine{
		{GoID: 7, Status: "waiting", WaitReason: "chan receive", Frames: c},
		{GoID: 3, Status: "waiting", WaitReason: "chan receive", Frames: a},
		{GoID: 9, Status: "waiting", WaitReason: "select", Frames: b},
	}
	got := GroupGoroutines(gs)
	if len(got) != 2 || !reflect.DeepEqual(got[0].GoIDs, []uint64{3, 9}) || got[0].Status != "" ||
		!reflect.DeepEqual(got[1].GoIDs, []uint64{7}) || got[1].Status != "chan receive" {
		t.Errorf("groups %+v", got)
	}
	if StackKey(a) != StackKey(b) || StackKey(a) == StackKey(c) {
		t.Errorf("keys: %q %q %q", StackKey(a), StackKey(b), StackKey(c))
	}
}
