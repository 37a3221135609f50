package goruntime

import (
	"strings"
	"testing"

	"stackshot/report"
)

// TestRunningFramesFollowTheStack: the goroutine list is read after the
// threads were captured, and a busy program moves goroutines between
// threads in between: a running goroutine's frames are those of the
// thread whose stack pointers lie in its stack, whichever thread it is on
// now; another goroutine's frames on its current thread are not taken.
func TestRunningFramesFollowTheStack(t *testing.T) {
	user := func(sp uint64, fns ...string) []report.Frame {
		var fr []report.Frame
		for i, fn := range fns {
			fr = append(fr, report.Frame{Kind: "user", Function: fn, SP: sp + uint64(16*i)})
		}
		return fr
	}
	threads := []report.Thread{
		{TID: 10, Frames: user(0xc000100f00, "main.other", "runtime.goexit")},
		{TID: 11, Frames: append([]report.Frame{{Kind: "kernel", Function: "futex_wait"}}, user(0xc000200e00, "main.spin", "runtime.goexit")...)},
		{TID: 12, Frames: user(0x7ffd0000, "runtime.futex", "runtime.mstart")},
	}
	g := Goroutine{ID: 7, Status: statusRunning, ThreadID: 10, StackLo: 0xc000200000, StackHi: 0xc000201000}
	snap := &Snapshot{Goroutines: []Goroutine{g}}
	sym := SymbolizerFunc(func(pc uint64, exact bool) []report.Frame {
		return []report.Frame{{Kind: "user", PC: pc, Function: "sched.frame"}}
	})
	got := snap.Report(sym, 0, threads)
	if len(got) != 1 || got[0].Error != "" || len(got[0].Frames) != 2 || got[0].Frames[0].Function != "main.spin" {
		t.Fatalf("moved goroutine: %+v", got)
	}
	if got[0].TID != 10 {
		t.Errorf("tid %d: the goroutine runs on thread 10 now", got[0].TID)
	}

	// On the system stack when read, its thread elsewhere when captured:
	// its own frames from where it left them.
	g.StackLo, g.StackHi = 0xc000300000, 0xc000301000
	g.PCs, g.Funcs = []uint64{0x401000, 0x402000}, []string{"runtime.systemstack_switch", "runtime.goexit"}
	snap.Goroutines[0] = g
	got = snap.Report(sym, 0, threads)
	if got[0].Error != "" || len(got[0].Frames) != 2 || got[0].Frames[0].Function != "sched.frame" {
		t.Errorf("goroutine on the system stack: %+v", got[0])
	}

	// Neither: said, not guessed.
	g.PCs, g.Funcs = nil, nil
	snap.Goroutines[0] = g
	got = snap.Report(sym, 0, threads)
	if len(got[0].Frames) != 0 || !strings.Contains(got[0].Error, "running on thread 10, which was running other code") {
		t.Errorf("goroutine not found: %+v", got[0])
	}
	g.ThreadID = 99
	snap.Goroutines[0] = g
	if got = snap.Report(sym, 0, threads); got[0].Error != "running on a thread that was not captured" {
		t.Errorf("thread not captured: %+v", got[0])
	}
}
