package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"stackshot/report"
)

// A panic while rendering one process costs that process its output; the
// processes before and after it are written whole, in text and in JSON.
func TestRenderPanicContained(t *testing.T) {
	procs := []*report.Process{
		{PID: 101, Comm: "first", Threads: []report.Thread{{TID: 101, Name: "first", Frames: []report.Frame{{Kind: "user", PC: 0x1000, Function: "alpha"}}}}},
		{PID: 202, Comm: "second", Threads: []report.Thread{{TID: 202, Name: "second"}}},
		{PID: 303, Comm: "third", Threads: []report.Thread{{TID: 303, Name: "third", Frames: []report.Frame{{Kind: "user", PC: 0x3000, Function: "gamma"}}}}},
	}
	renderHook = func(pid int) {
		if pid == 202 {
			panic("test hook: renderer panic")
		}
	}
	defer func() { renderHook = nil }()

	var buf bytes.Buffer
	if err := Text(&buf, procs, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{"Process 101 (first)", " in alpha", "Process 202: (internal error while rendering process 202: test hook: renderer panic",
		"Process 303 (third)", " in gamma"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "second") {
		t.Errorf("half-rendered process 202 in the text:\n%s", text)
	}

	buf.Reset()
	if err := JSONList(&buf, procs, true); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		PID      int               `json:"pid"`
		Warnings []string          `json:"warnings"`
		Threads  []json.RawMessage `json:"threads"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(got) != 3 || len(got[0].Threads) != 1 || len(got[2].Threads) != 1 || len(got[1].Threads) != 0 ||
		len(got[1].Warnings) != 1 || !strings.Contains(got[1].Warnings[0], "internal error while rendering process 202") {
		t.Errorf("json: %s", buf.String())
	}
}

// encoding/json escapes C0 controls and turns invalid UTF-8 into U+FFFD:
// the JSON of hostile names holds no raw control byte and still decodes.
func TestJSONHostileNames(t *testing.T) {
	p := &report.Process{PID: 7, Comm: "\x1b[2J\xff", Exe: "/x/\x07\x1b]0;t\x07",
		Threads: []report.Thread{{TID: 7, Name: "\x1b[31m", Error: "bad \x00 byte",
			Frames: []report.Frame{{Kind: "user", PC: 1, Function: "f\x1b[2J\xc3", File: "a\nb.c", Module: "/m\x1b"}}}}}
	var buf bytes.Buffer
	if err := JSONList(&buf, []*report.Process{p}, false); err != nil {
		t.Fatal(err)
	}
	for i, c := range buf.Bytes() {
		if c < 0x20 && c != '\n' {
			t.Fatalf("raw %#02x at %d in %s", c, i, buf.String())
		}
	}
	var got struct {
		Comm    string `json:"comm"`
		Threads []struct {
			Name   string `json:"name"`
			Frames []struct {
				Function string `json:"function"`
			} `json:"frames"`
		} `json:"threads"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Comm != "\x1b[2J\uFFFD" || got.Threads[0].Name != "\x1b[31m" || got.Threads[0].Frames[0].Function != "f\x1b[2J\uFFFD" {
		t.Errorf("decoded %+v", got)
	}
}
