package report

import (
	"fmt"
	"testing"
)

func TestFoldNames(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"worker-1", "worker-2", "worker-10"}, "[worker-*]"},
		{[]string{"w-001", "w-002", "main"}, "[main w-*]"},
		{[]string{"io", "io"}, "[io]"},
		{[]string{"pool-3-thread-1", "pool-3-thread-2", "pool-4-thread-1"}, "[pool-*]"},
		{[]string{"locker-a", "locker-b"}, "[locker-*]"},
		{[]string{"ab", "ac"}, "[ab ac]"},
		{[]string{"a1", "b1", "c1", "d1", "e1", "f1", "g1", "h1", "i1", "j1"}, "[a1 b1 c1 d1 e1 f1 g1 h1 (2 more)]"},
	} {
		if got := fmt.Sprint(FoldNames(c.in)); got != c.want {
			t.Errorf("FoldNames(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestGroupThreads(t *testing.T) {
	stack := func(fns ...string) []Frame {
		var out []Frame
		for _, f := range fns {
			out = append(out, Frame{Kind: "user", Function: f})
		}
		return out
	}
	idle := stack("pthread_cond_wait", "work", "start_thread")
	ts := []Thread{
		{TID: 1, Name: "main", Frames: stack("read", "main")},
		{TID: 5, Name: "w-2", Frames: idle},
		{TID: 3, Name: "w-1", Frames: idle},
		{TID: 7, Name: "io", Frames: stack("epoll_wait", "loop", "start_thread")},
		{TID: 9, Name: "w-3", Frames: idle},
		// Same function names at other PCs are the same sequence.
		{TID: 11, Name: "w-4", Frames: []Frame{{Kind: "user", Function: "pthread_cond_wait", PC: 9}, {Kind: "user", Function: "work", PC: 10}, {Kind: "user", Function: "start_thread"}}},
		// An unnamed frame differs by module offset.
		{TID: 12, Name: "x", Frames: []Frame{{Kind: "user", HasModule: true, Module: "/a", ModuleOffset: 0x10}}},
		{TID: 13, Name: "x", Frames: []Frame{{Kind: "user", HasModule: true, Module: "/a", ModuleOffset: 0x20}}},
	}
	g := GroupThreads(ts, "")
	var got []string
	for _, x := range g {
		got = append(got, fmt.Sprint(x.Count, x.TIDs, x.Names, x.Members))
	}
	want := "[4 [5 3 9 11] [w-*] [1 2 4 5] 1 [1] [main] [0] 1 [7] [io] [3] 1 [12] [x] [6] 1 [13] [x] [7]]"
	if s := fmt.Sprint(got); s != want {
		t.Errorf("groups\n%s, want\n%s", s, want)
	}
}
