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
	var buf bytes.Buffer
	if json {
		if err := JSONList(&buf, procs, several); err != nil {
			return nil, err
		}
		return term.EscapeJSON(buf.Bytes()), nil
	}
	hint := 0
	for _, p := range procs {
		hint += textSizeHint(p)
	}
	buf.Grow(hint)
	if err := Text(&buf, procs, opts); err != nil {
		return nil, err
	}
	return term.EscapeText(buf.Bytes()), nil
}

// textSizeHint is about the size of p's text: its buffer is made once
// instead of doubled (and copied) about ten times for a deep stack.
func textSizeHint(p *report.Process) int {
	n := 1024 + 512*len(p.Warnings)
	for i := range p.Threads {
		n += 256 + 96*len(p.Threads[i].Frames)
	}
	return min(n, 64<<20)
}
