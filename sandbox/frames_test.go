//go:build linux

package sandbox

import (
	"reflect"
	"strings"
	"testing"

	"stackshot/report"
)

// The frame table (shareFrames) carries a process's threads to the parent
// as they were, and the parent (joinFrames) refuses a table that does not
// fit its threads: bad indexes, lengths that differ, frames left inline,
// more frames than an answer could carry written out.
func TestShareFrames(t *testing.T) {
	libc := report.Frame{PC: 0x7f00, Kind: "user", Function: "read", Module: "/lib/libc.so.6", HasModule: true, BuildID: "ab", Method: "cfi"}
	main := report.Frame{PC: 0x5500, Kind: "user", Function: "main", File: "m.c", Line: 3, Method: "cfi"}
	k := report.Frame{PC: 0xffff, Kind: "kernel", Function: "do_syscall_64"}
	proc := func() *report.Process {
		f := func(fr report.Frame, sp uint64) report.Frame { fr.SP = sp; return fr }
		return &report.Process{PID: 7, Threads: []report.Thread{
			{TID: 7, Frames: []report.Frame{k, f(libc, 0x100), f(main, 0x180)}},
			{TID: 8},
			{TID: 9, Frames: []report.Frame{f(libc, 0x900), f(main, 0x980)}},
		}}
	}
	up := upMsg{Kind: kResolve, Result: proc()}
	shareFrames(&up)
	if len(up.FrameTab) != 3 {
		t.Errorf("%d distinct frames, want 3", len(up.FrameTab))
	}
	if err := joinFrames(&up); err != nil {
		t.Fatal(err)
	}
	if want := proc(); !reflect.DeepEqual(up.Result, want) {
		t.Errorf("after the table:\n%+v\nwant\n%+v", up.Result, want)
	}
	bad := []struct {
		name string
		edit func(*upMsg)
		want string
	}{
		{"index past the table", func(u *upMsg) { u.FrameOf[0][1] = len(u.FrameTab) }, "frame 3 of 3"},
		{"negative index", func(u *upMsg) { u.FrameOf[2][0] = -1 }, "frame -1"},
		{"a thread missing", func(u *upMsg) { u.FrameOf = u.FrameOf[:2] }, "of 3 threads"},
		{"stack pointers missing", func(u *upMsg) { u.FrameSP[0] = u.FrameSP[0][:1] }, "1 stack pointers"},
		{"frames also inline", func(u *upMsg) { u.Result.Threads[1].Frames = []report.Frame{main} }, "thread 1"},
		{"too many frames", func(u *upMsg) {
			u.FrameOf[1] = make([]int, maxSharedFrames)
			u.FrameSP[1] = make([]uint64, maxSharedFrames)
		}, "over"},
	}
	for _, b := range bad {
		up := upMsg{Kind: kResolve, Result: proc()}
		shareFrames(&up)
		b.edit(&up)
		if err := joinFrames(&up); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v, want an error with %q", b.name, err, b.want)
		}
	}
	// An answer without a table keeps its frames.
	plain := upMsg{Kind: kResolve, Result: proc()}
	if err := joinFrames(&plain); err != nil || !reflect.DeepEqual(plain.Result, proc()) {
		t.Errorf("an answer without a table: %v", err)
	}
}
