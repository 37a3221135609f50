package unwind

import "testing"

// faultySpace panics on every lookup: a bug in a space (or in the walk it
// drives) met on one thread's hostile data.
type faultySpace struct{}

func (faultySpace) Lookup(addr uint64) (ModuleInfo, bool)       { panic("lookup bug") }
func (faultySpace) ReadCode(p []byte, addr uint64) (int, error) { panic("read bug") }

// TestUnwindPanicContained: a panic during the walk ends this thread's walk
// with StopFault and its first frame (the registers' PC), instead of
// ending the program; the caller's earlier frames in out are kept.
func TestUnwindPanicContained(t *testing.T) {
	var in Input
	in.Regs.Set(RegRIP, 0x401000)
	in.Regs.Set(RegRSP, 0x7ffd0000)
	in.Space = faultySpace{}
	prior := []Frame{{PC: 0xdead}}
	got, stop := Unwind(&in, prior)
	if stop != StopFault {
		t.Fatalf("stop = %v, want %v", stop, StopFault)
	}
	if len(got) != 2 || got[0].PC != 0xdead || got[1].PC != 0x401000 || got[1].Method != MethodRegs {
		t.Errorf("frames %+v, want the prior frame and the registers' PC", got)
	}
	if StopFault.String() != "unwinder fault" {
		t.Errorf("StopFault.String() = %q", StopFault.String())
	}
}
