//go:build linux

package sandbox

import (
	"encoding/json"
	"testing"
)

// The answer that warms the parent's decoding decodes, into the fields it
// names: one that did not would warm nothing, silently.
func TestWarmAnswer(t *testing.T) {
	var m upMsg
	if err := json.Unmarshal([]byte(warmAnswer), &m); err != nil {
		t.Fatal(err)
	}
	if m.Result == nil || len(m.Result.Threads) != 1 || len(m.Result.Goroutines) != 1 || len(m.FrameTab) != 1 ||
		len(m.WaitTab) != 1 || len(m.BuildIDs) != 1 || len(m.Unwound) != 1 || m.Key == nil || len(m.Cands) != 1 {
		t.Errorf("the warming answer fills too little: %+v", m)
	}
}
