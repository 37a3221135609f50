package output

import (
	"bytes"

	"stackshot/internal/term"
	"stackshot/report"
)

// Render renders dump-style reports whole: JSON (a list when several) or
// text. The text writer escapes each string a target controls; Render
// escapes the whole once more, to catch any a renderer forgot
// (encoding/json escapes C0 controls only).
func Render(procs []*report.Process, json, several bool, opts TextOptions) ([]byte, error) {
	if json {
		var buf bytes.Buffer
		if err := JSONList(&buf, procs, several); err != nil {
			return nil, err
		}
		return term.EscapeJSON(buf.Bytes()), nil
	}
	// Made at its size (make: fresh memory is not cleared again, as a
	// Grow's is) and written in place by each process's renderer.
	buf := bytes.NewBuffer(make([]byte, 0, textSizeHint(procs)))
	if err := Text(buf, procs, opts); err != nil {
		return nil, err
	}
	return term.EscapeText(buf.Bytes()), nil
}

// textSizeHint is about the size of the text of procs: its buffer is
// made once instead of doubled (and copied) about ten times for a deep
// stack.
func textSizeHint(procs []*report.Process) int {
	n := 0
	for _, p := range procs {
		n += 1024 + 512*len(p.Warnings)
		for i := range p.Threads {
			n += 256 + 96*len(p.Threads[i].Frames)
		}
	}
	return min(n, 64<<20)
}
