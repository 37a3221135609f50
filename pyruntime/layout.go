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

	// The threads' threading names (names.go): the interpreter's modules
	// dict (sys.modules), a module's md_dict, dicts and their keys, an
	// instance's attributes, ints.
	InterpModules int // PyInterpreterState.modules (.imports.modules 3.12+)
	ModuleDict    int // PyModuleObject.md_dict
	DictKeys      int // PyDictObject.ma_keys
	DictValues    int // PyDictObject.ma_values (a split table's values)
	// PyDictKeysObject: dk_size (before 3.11), or dk_log2_size,
	// dk_log2_index_bytes and dk_kind (3.11+); dk_nentries, dk_indices.
	KeysSize, KeysLog2Size, KeysLog2IndexBytes, KeysKind int
	KeysNentries, KeysIndices                            int
	ValuesValues                                         int // PyDictValues.values (3.11+; 0: ma_values is the array)
	ValuesValid                                          int // PyDictValues.valid (3.13: inline values in use)
	EntrySize                                            int // sizeof(PyDictKeyEntry): hash, key, value
	UnicodeEntrySize                                     int // sizeof(PyDictUnicodeEntry): key, value (3.11+)
	// PyTypeObject's tp_flags, tp_basicsize, tp_dictoffset, and
	// PyHeapTypeObject.ht_cached_keys (a heap type's instances' shared
	// keys).
	TypeFlags, TypeBasicSize, TypeDictOffset, HeapTypeCachedKeys int
	// Type flags: Py_TPFLAGS_HEAPTYPE, _MANAGED_DICT (3.11+),
	// _INLINE_VALUES (3.13+); 0 where the release has none.
	FlagHeapType, FlagManagedDict, FlagInlineValues int
	// Where an instance of a type with a managed dict keeps it: the
	// dict's offset from the object (negative, 3.11+), the values' (3.11;
	// 0 none); TaggedValues 1: the dict's word holds either the dict or,
	// its low bit set, the values pointer minus one (3.12).
	ManagedDict, ManagedValues, TaggedValues int
	// PyLongObject: lv_tag (3.12+; before, the sign and size are ob_size),
	// ob_digit, and PyLong_SHIFT (bits per digit).
	LongTag, LongDigits, LongShift int
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
