//go:build linux

package sampler

import (
	"fmt"
	"io"
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

// TerminalProgress is what record shows on w while it samples: when on (w
// is a terminal), the progress line rewritten in place and the string that
// clears it; else nothing.
func TerminalProgress(on bool, w io.Writer) (clear string, show func(Progress)) {
	if !on {
		return "", nil
	}
	return ClearLine, func(p Progress) { fmt.Fprint(w, p.Line()) }
}
