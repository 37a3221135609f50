package output

import (
	"encoding/json"
	"fmt"
	"io"
	"stackshot/report"
	"time"
)

// Schema is the version of the dump JSON.
const Schema = 1

type jsonProcess struct {
	Schema   int          `json:"schema"`
	PID      int          `json:"pid"`
	Comm     string       `json:"comm"`
	Exe      string       `json:"exe"`
	Cmdline  string       `json:"cmdline"`
	Time     *string      `json:"time"` // null: not known (a core records none)
	State    string       `json:"state"`
	Signal   string       `json:"signal,omitempty"` // what ended it (a core's NT_SIGINFO)
	Warnings []string     `json:"warnings,omitempty"`
	WallUS   int64        `json:"wall_us"`
	Threads  []jsonThread `json:"threads"`
	jsonProcessDiag
	jsonGo
}

type jsonSyscall struct {
	Nr   int64    `json:"nr"`
	Name string   `json:"name"`
	Args []string `json:"args"`
	SP   string   `json:"sp"`
	PC   string   `json:"pc"`
}

type jsonThread struct {
	TID     int          `json:"tid"`
	Name    string       `json:"name"`
	State   string       `json:"state"`
	Syscall *jsonSyscall `json:"syscall"`
	Capture string       `json:"capture"`
	PauseUS int64        `json:"pause_us"` // whole microseconds, rounded
	Frames  []jsonFrame  `json:"frames"`
	Error   *string      `json:"error"`
	Stop    string       `json:"stop,omitempty"`
	Torn    bool         `json:"torn,omitempty"`
	GIL     bool         `json:"gil,omitempty"` // holds a CPython GIL
	// A JavaThread's java.lang.Thread name and state.
	JavaName  string `json:"java_name,omitempty"`
	JavaState string `json:"java_state,omitempty"`
	// A CPython thread's threading name.
	PythonName string `json:"python_name,omitempty"`
	jsonThreadDiag
}

type jsonFrame struct {
	PC              *string `json:"pc"` // null: a Python frame
	Kind            string  `json:"kind"`
	Function        *string `json:"function,omitempty"`
	QualName        string  `json:"qualname,omitempty"`
	Offset          *uint64 `json:"offset,omitempty"`
	Module          string  `json:"module,omitempty"`
	ModuleOffset    string  `json:"module_offset,omitempty"`
	BuildID         string  `json:"build_id,omitempty"`
	File            string  `json:"file,omitempty"`
	Line            int     `json:"line,omitempty"`
	Inlined         bool    `json:"inlined"`
	Method          string  `json:"method"`
	BuildIDMismatch bool    `json:"build_id_mismatch,omitempty"`
	ModuleMissing   bool    `json:"module_missing,omitempty"`
	SignalFrame     bool    `json:"signal_frame,omitempty"`
	FrameType       string  `json:"frame_type,omitempty"` // Java frames
}

func hex(v uint64) string { return fmt.Sprintf("%#x", v) }

// timeJSON is a capture's time in RFC 3339, or nil when not known (never
// the zero time's year 1).
func timeJSON(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

func toJSON(p *report.Process) jsonProcess {
	jp := jsonProcess{Schema: Schema, PID: p.PID, Comm: p.Comm, Exe: p.Exe, Cmdline: p.Cmdline,
		Time: timeJSON(p.Time), State: p.State, Signal: signalName(p.FatalSignal), Warnings: p.Warnings,
		WallUS: p.WallNS / 1000, Threads: []jsonThread{}}
	for i := range p.Threads {
		t := &p.Threads[i]
		jt := jsonThread{TID: t.TID, Name: t.Name, State: t.State, Capture: t.Capture,
			PauseUS: (t.PauseNS + 500) / 1000, Frames: []jsonFrame{}, Stop: t.Stop, Torn: t.Torn, GIL: t.HoldsGIL,
			JavaName: t.JavaName, JavaState: t.JavaState, PythonName: t.PythonName}
		if t.Syscall != nil && t.Syscall.InCall {
			js := &jsonSyscall{Nr: t.Syscall.Nr, Name: t.Syscall.Name, SP: hex(t.Syscall.SP), PC: hex(t.Syscall.PC)}
			for _, a := range t.Syscall.Args {
				js.Args = append(js.Args, hex(a))
			}
			jt.Syscall = js
		}
		if t.Error != "" {
			e := t.Error
			jt.Error = &e
		}
		for j := range t.Frames {
			jt.Frames = append(jt.Frames, frameJSON(&t.Frames[j]))
		}
		inlinedOffsets(jt.Frames)
		jt.jsonThreadDiag = threadDiagJSON(t)
		jp.Threads = append(jp.Threads, jt)
	}
	jp.jsonProcessDiag = processDiagJSON(p)
	jp.jsonGo = goJSON(p)
	return jp
}

// JSON writes one object for one process, an array for several.
func JSON(w io.Writer, procs []*report.Process) error {
	return JSONList(w, procs, len(procs) > 1)
}

// JSONList writes an array when array is true (several PIDs were asked
// for, even if only one could be read), else one object.
func JSONList(w io.Writer, procs []*report.Process, array bool) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if len(procs) == 1 && !array {
		return enc.Encode(safeJSON(procs[0]))
	}
	all := make([]jsonProcess, 0, len(procs))
	for _, p := range procs {
		all = append(all, safeJSON(p))
	}
	return enc.Encode(all)
}
