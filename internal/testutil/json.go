package testutil

// The tests' own reading of the JSON contract (shared/CLI.md, schema 1),
// field by field as documented: one copy, for every package's tests.

// DumpProcess is one process of `dump --json`.
type DumpProcess struct {
	Schema   int          `json:"schema"`
	PID      int          `json:"pid"`
	Comm     string       `json:"comm"`
	Exe      string       `json:"exe"`
	Cmdline  string       `json:"cmdline"`
	Time     string       `json:"time"`
	State    string       `json:"state"`
	Warnings []string     `json:"warnings"`
	Threads  []DumpThread `json:"threads"`
	Runtime  *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"runtime"`
	// The diagnosis: what the process waits for.
	Verdict   string `json:"verdict"`
	Deadlocks *[]struct {
		TIDs      []int     `json:"tids"`
		Addresses []*string `json:"addresses"`
	} `json:"deadlocks"`
	Groups []struct {
		Count  int         `json:"count"`
		TIDs   []int       `json:"tids"`
		Names  []string    `json:"names"`
		Frames []JSONFrame `json:"frames"`
	} `json:"groups"`
	ProgressSummary *struct {
		Snapshots int `json:"snapshots"`
		Stuck     int `json:"stuck"`
		Spinning  int `json:"spinning"`
		Moving    int `json:"moving"`
	} `json:"progress_summary"`
}

// WaitingFor is what a blocked thread waits for, and who holds it.
type WaitingFor struct {
	Kind     string  `json:"kind"`
	Address  *string `json:"address"`
	OwnerTID *int    `json:"owner_tid"`
	Note     string  `json:"note"`
	// Additions (2).
	Symbol    string `json:"symbol"`
	OwnerPID  int    `json:"owner_pid"`
	OwnerComm string `json:"owner_comm"`
	Class     string `json:"class"`
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
	GIL     bool        `json:"gil"`
	// A CPython thread's threading name.
	PythonName string `json:"python_name"`
	// The diagnosis of the thread.
	WaitingFor *WaitingFor `json:"waiting_for"`
	Progress   string      `json:"progress"`
	SameStackS *float64    `json:"same_stack_s"`
}

// JSONFrame is one frame object, as dumps and profiles carry them.
type JSONFrame struct {
	PC              string  `json:"pc"`
	Kind            string  `json:"kind"`
	Function        *string `json:"function"`
	QualName        string  `json:"qualname"` // a Python frame's
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
	FrameType       string  `json:"frame_type"`
}

// Fn is the frame's function name, "?" when unknown.
func (f JSONFrame) Fn() string {
	if f.Function == nil {
		return "?"
	}
	return *f.Function
}
