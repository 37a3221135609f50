package output

import (
	"bufio"
	"bytes"
	"fmt"
	"time"

	"stackshot/internal/contain"
	"stackshot/report"
)

// renderHook, when set (by tests only), is called with each process's pid
// before it is rendered; a test makes it panic for one process.
var renderHook func(pid int)

// safeTextProcess renders one process; a panic in the renderer costs that
// process its text (a one-line note in its place), not the report.
func safeTextProcess(w *bufio.Writer, p *report.Process, o TextOptions) {
	var buf bytes.Buffer
	buf.Grow(textSizeHint(p))
	bw := bufio.NewWriter(&buf)
	err := contain.Call(fmt.Sprintf("rendering process %d", p.PID), func() {
		if renderHook != nil {
			renderHook(p.PID)
		}
		textProcess(bw, p, o)
		bw.Flush()
	})
	if err != nil {
		fmt.Fprintf(w, "Process %d: (%v)\n", p.PID, err)
		return
	}
	w.Write(buf.Bytes())
}

// safeJSON is toJSON with a panic turned into a process object that says
// so in its warnings and has no threads.
func safeJSON(p *report.Process) (jp jsonProcess) {
	err := contain.Call(fmt.Sprintf("rendering process %d", p.PID), func() {
		if renderHook != nil {
			renderHook(p.PID)
		}
		jp = toJSON(p)
	})
	if err != nil {
		jp = jsonProcess{Schema: Schema, PID: p.PID, Time: p.Time.UTC().Format(time.RFC3339Nano),
			Warnings: []string{err.Error()}, Threads: []jsonThread{}}
	}
	return jp
}
