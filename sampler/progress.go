//go:build linux

package sampler

import (
	"fmt"
	"time"
)

// ClearLine erases a progress line on a terminal.
const ClearLine = "\r\033[K"

// Line is p as the line a terminal shows while recording, rewritten in
// place (it begins with "\r").
func (p Progress) Line() string {
	return fmt.Sprintf("\rrecording %s/%s: %d samples, %.1f Hz, %d threads   ",
		p.Elapsed.Round(100*time.Millisecond), p.Duration, p.Samples, float64(p.Ticks)/p.Elapsed.Seconds(), p.Threads)
}
