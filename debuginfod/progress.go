//go:build linux

package debuginfod

import (
	"fmt"
	"time"
)

// The progress line: on a terminal, one line rewritten in place at most
// every progressEvery and cleared when the last download ends; elsewhere
// (DEBUGINFOD_PROGRESS off a terminal), one line per file fetched.

const progressEvery = 100 * time.Millisecond

func (c *Client) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active++
	c.showLocked(false)
}

func (c *Client) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active--
	if c.active == 0 && c.shown && c.o.Progress != nil {
		fmt.Fprint(c.o.Progress, "\r\033[K")
		c.shown = false
	}
}

func (c *Client) progress(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes += n
	c.showLocked(false)
}

func (c *Client) fetched(buildID string, kind Kind, n int64, server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done++
	if c.o.Progress != nil && !c.o.Terminal {
		fmt.Fprintf(c.o.Progress, "stackshot: debuginfod: fetched %s/%s (%s) from %s\n", buildID, kind, size(n), server)
		return
	}
	c.showLocked(true)
}

// showLocked rewrites the terminal's progress line (c.mu held).
func (c *Client) showLocked(force bool) {
	if c.o.Progress == nil || !c.o.Terminal || c.active == 0 {
		return
	}
	if !force && time.Since(c.lastShow) < progressEvery {
		return
	}
	c.lastShow = time.Now()
	c.shown = true
	fmt.Fprintf(c.o.Progress, "\r\033[Kstackshot: debuginfod: downloading %d file(s), %s received, %d done", c.active, size(c.bytes), c.done)
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
