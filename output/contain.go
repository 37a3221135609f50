package output

import (
	"bufio"
	"bytes"
	"fmt"

	"stackshot/internal/contain"
	"stackshot/report"
)

// renderHook, when set (by tests only), is called with each process's pid
// before it is rendered; a test makes it panic for one process.
var renderHook func(pid int)

// safeTextProcess renders one process at the end of buf; a panic in the
// renderer costs that process its text (a one-line note in its place,
// what it had written taken back), not the report.
func safeTextProcess(buf *bytes.Buffer, p *report.Process, o TextOptions) {
	mark := buf.Len()
	bw := bufio.NewWriter(buf)
	err := contain.Call(fmt.Sprintf("rendering process %d", p.PID), func() {
		if renderHook != nil {
			renderHook(p.PID)
		}
		textProcess(bw, p, o)
		bw.Flush()
	})
	if err != nil {
		buf.Truncate(mark)
		fmt.Fprintf(buf, "Process %d: (%v)\n", p.PID, err)
	}
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
		jp = jsonProcess{Schema: Schema, PID: p.PID, Time: timeJSON(p.Time),
			Warnings: []string{err.Error()}, Threads: []jsonThread{}}
	}
	return jp
}
