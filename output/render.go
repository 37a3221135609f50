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
	if err := Text(&buf, procs, opts); err != nil {
		return nil, err
	}
	return term.EscapeText(buf.Bytes()), nil
}
