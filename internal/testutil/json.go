package testutil

// The tests' own reading of the JSON contract (shared/CLI.md, schema 1),
// field by field as documented: one copy, for every package's tests.

// DumpProcess is one process of `dump --json`.
type DumpProcess struct {
	Schema   int          `json:"schema"`
	PID      int          `json:"pid"`
	Comm     string       `json:"comm"`
	Exe      string       `json:"exe"`
	Time     string       `json:"time"`
	State    string       `json:"state"`
	Warnings []string     `json:"warnings"`
	Threads  []DumpThread `json:"threads"`
}

// DumpThread is one thread of a dumped process.
type DumpThread struct {
	TID     int    `json:"tid"`
	Name    string `json:"name"`
	State   string `json:"state"`
	Syscall *struct {
		Nr   int64  `json:"nr"`
		Name string `json:"name"`
	} `json:"syscall"`
	Capture string      `json:"capture"`
	PauseUS float64     `json:"pause_us"`
	Frames  []JSONFrame `json:"frames"`
	Error   *string     `json:"error"`
	Stop    string      `json:"stop"`
}

// JSONFrame is one frame object, as dumps and profiles carry them.
type JSONFrame struct {
	PC              string  `json:"pc"`
	Kind            string  `json:"kind"`
	Function        *string `json:"function"`
	Offset          *uint64 `json:"offset"`
	Module          string  `json:"module"`
	ModuleOffset    string  `json:"module_offset"`
	BuildID         string  `json:"build_id"`
	File            string  `json:"file"`
	Line            int     `json:"line"`
	Inlined         bool    `json:"inlined"`
	Method          string  `json:"method"`
	BuildIDMismatch bool    `json:"build_id_mismatch"`
	SignalFrame     bool    `json:"signal_frame"`
}

// Fn is the frame's function name, "?" when unknown.
func (f JSONFrame) Fn() string {
	if f.Function == nil {
		return "?"
	}
	return *f.Function
}
