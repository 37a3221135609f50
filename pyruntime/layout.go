package pyruntime

// Layout is where CPython keeps what the reader follows, for one minor
// release: byte offsets into its structures, -1 where the release has no
// such member. layouts.go holds one per release, written by gen/gen.go
// from the release's own headers.
type Layout struct {
	Minor int // 3.Minor

	RuntimeInterpHead int // _PyRuntimeState.interpreters.head
	InterpNext        int // PyInterpreterState.next
	InterpThreadsHead int // PyInterpreterState.threads.head (tstate_head before 3.11)

	ThreadNext     int // PyThreadState.next
	ThreadInterp   int // PyThreadState.interp
	ThreadID       int // PyThreadState.thread_id (a pthread_t)
	ThreadNativeID int // PyThreadState.native_thread_id (3.11+)
	// ThreadFrame is PyThreadState.frame (3.8-3.10: a PyFrameObject),
	// .cframe (3.11, 3.12: then CFrameCurrent leads to the frame), or
	// .current_frame (3.13+).
	ThreadFrame   int
	CFrameCurrent int

	// Frames: PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+).
	FrameBack    int // f_back / previous
	FrameCode    int // f_code / f_executable
	FrameInstr   int // f_lasti (an int) / prev_instr / instr_ptr (pointers)
	FrameOwner   int // owner (3.11+)
	FrameIsEntry int // is_entry (3.11)
	// OwnedByCStack is FRAME_OWNED_BY_CSTACK (3.12+): the marker frame
	// each _PyEval_EvalFrameDefault call pushes.
	OwnedByCStack int

	CodeAdaptive  int // co_code_adaptive: the instructions (3.11+)
	CodeQualname  int
	CodeLinetable int // co_linetable (co_lnotab before 3.10)
	CodeFilename  int
	CodeName      int
	CodeFirstLine int

	// The GIL: _PyRuntime.ceval.gil (a struct _gil_runtime_state, before
	// 3.12) or PyInterpreterState.ceval.gil (a pointer to one, 3.12+);
	// its locked flag and last holder (a thread state).
	RuntimeGIL    int
	InterpGIL     int
	GILLocked     int
	GILLastHolder int

	ObType         int // PyObject.ob_type
	VarSize        int // PyVarObject.ob_size
	BytesData      int // PyBytesObject.ob_sval
	StrLength      int // PyASCIIObject.length
	StrState       int // PyASCIIObject.state
	StrASCIIData   int // sizeof(PyASCIIObject): a compact ASCII string's characters
	StrCompactData int // sizeof(PyCompactUnicodeObject): other compact strings'
}

// layoutFor is the layout of release 3.minor, or nil.
func layoutFor(minor int) *Layout {
	for i := range layouts {
		if layouts[i].Minor == minor {
			return &layouts[i]
		}
	}
	return nil
}

// knownMinors lists the releases the table knows ("3.8, 3.9, ...").
func knownMinors() []string {
	var s []string
	for _, l := range layouts {
		s = append(s, "3."+itoa(l.Minor))
	}
	return s
}
