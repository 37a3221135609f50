//go:build linux

package sandbox

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/resolve"
)

// The child's answer (shareFrames) carries what unwinding found, and the
// parent (joinFrames) gives each thread of its own capture its head and
// those frames back, as the child had them; it refuses an answer that does
// not fit its capture: bad indexes, counts that differ, bytes cut short or
// left over, threads sent whole (besides a table, or instead of one), more
// frames than an answer could carry written out.
func TestShareFrames(t *testing.T) {
	libc := report.Frame{PC: 0x7f00, Kind: "user", Function: "read", Module: "/lib/libc.so.6", HasModule: true, BuildID: "ab", Method: "cfi"}
	main := report.Frame{PC: 0x5500, Kind: "user", Function: "main", File: "m.c", Line: 3, Method: "cfi"}
	k := report.Frame{PC: 0xffff, Kind: "kernel", Function: "do_syscall_64"}
	capture := &ptrace.Process{PID: 7, Threads: []ptrace.Thread{
		{TID: 7, Name: "main", State: "S", Method: "nostop", Syscall: &procmaps.Syscall{Nr: 0, InCall: true, SP: 0x100, PC: 0x7f00}},
		{TID: 8, Name: "w-\xff", State: "R", Method: "ptrace", PauseNS: 40, Err: "cannot read its registers"},
		{TID: 9, Name: "w-2", State: "S", Method: "nostop", Torn: true},
	}}
	proc := func() *report.Process {
		f := func(fr report.Frame, sp uint64) report.Frame { fr.SP = sp; return fr }
		rp := &report.Process{PID: 7, Comm: "m"}
		for i := range capture.Threads {
			rp.Threads = append(rp.Threads, resolve.Head(&capture.Threads[i]))
		}
		rp.Threads[0].Frames = []report.Frame{k, f(libc, 0x100), f(main, 0x180)}
		rp.Threads[0].Stop = "end of stack"
		rp.Threads[2].Frames = []report.Frame{f(libc, 0x900), f(main, 0x880)}
		rp.Threads[2].Error, rp.Threads[2].Stop = "stack may be torn", "stack pointer went down"
		return rp
	}
	up := upMsg{Kind: kResolve, Result: proc()}
	shareFrames(&up)
	if len(up.FrameTab) != 3 || up.Result.Threads != nil {
		t.Errorf("%d distinct frames and %d threads sent, want 3 and none", len(up.FrameTab), len(up.Result.Threads))
	}
	if err := joinFrames(&up, capture); err != nil {
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
		{"index past the table", func(u *upMsg) { u.FrameTab = u.FrameTab[:2] }, "frame 2 of 2"},
		{"a thread missing", func(u *upMsg) { u.Unwound = u.Unwound[:2] }, "for 2 of 3 threads"},
		{"bytes cut short", func(u *upMsg) { u.FrameRefs = u.FrameRefs[:len(u.FrameRefs)-1] }, "cut short"},
		{"bytes left over", func(u *upMsg) { u.FrameRefs = append(u.FrameRefs, 0) }, "1 bytes after"},
		{"threads also sent", func(u *upMsg) { u.Result.Threads = []report.Thread{{TID: 7}} }, "1 threads sent"},
		{"a count past the answer", func(u *upMsg) { u.FrameRefs = binary.AppendUvarint(nil, 1<<40) }, "thread 0: frame count"},
		{"too many frames", func(u *upMsg) {
			refs := binary.AppendUvarint(nil, maxSharedFrames+1)
			for range maxSharedFrames + 1 {
				refs = append(refs, 0, 0)
			}
			u.FrameRefs = refs
		}, "over"},
	}
	for _, b := range bad {
		up := upMsg{Kind: kResolve, Result: proc()}
		shareFrames(&up)
		b.edit(&up)
		if err := joinFrames(&up, capture); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v, want an error with %q", b.name, err, b.want)
		}
	}
	// The packing, as written by hand: two frames at SPs 8 and 16, then
	// one at 24 (counts, then index and SP less the last, zigzagged).
	two := upMsg{Kind: kResolve, Result: &report.Process{PID: 1},
		Unwound: []unwound{{Stop: "end of stack"}, {Error: "x"}}, FrameTab: []report.Frame{{PC: 1, Function: "f"}},
		FrameRefs: []byte{2, 0, 16, 0, 16, 1, 0, 48}}
	twoThreads := &ptrace.Process{PID: 1, Threads: []ptrace.Thread{{TID: 1}, {TID: 2}}}
	if err := joinFrames(&two, twoThreads); err != nil {
		t.Fatal(err)
	}
	var sps [][]uint64
	for _, th := range two.Result.Threads {
		var sp []uint64
		for _, f := range th.Frames {
			sp = append(sp, f.SP)
		}
		sps = append(sps, sp)
	}
	if want := [][]uint64{{8, 16}, {24}}; !reflect.DeepEqual(sps, want) || two.Result.Threads[1].Error != "x" {
		t.Errorf("hand-packed answer: SPs %v, want %v; %+v", sps, want, two.Result.Threads)
	}
	// An answer with its threads written out, heads and all, is refused:
	// a thread's id, name, state and system call come from the capture.
	plain := upMsg{Kind: kResolve, Result: proc()}
	plain.Result.Threads[0].Name = "not what was captured"
	if err := joinFrames(&plain, capture); err == nil || !strings.Contains(err.Error(), "3 threads sent") {
		t.Errorf("an answer with its threads written out: %v, want refused", err)
	}
}
