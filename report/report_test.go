package report

import (
	"testing"
	"unsafe"
)

// TestFrameSize keeps Frame's flags packed together: a 1,000-frame stack
// is a thousand Frames of fresh memory a one-off dump faults in, and a
// flag placed between two words costs a whole word.
func TestFrameSize(t *testing.T) {
	if n := unsafe.Sizeof(Frame{}); n > 168 {
		t.Errorf("Frame is %d bytes, want at most 168 (bools together, after the words)", n)
	}
}
