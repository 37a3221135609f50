// probe.c prints the offsets stackshot's Python reader needs, as one Go
// composite literal, from the headers it is compiled against (see gen.go).
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#else
#include "internal/pycore_pystate.h"
#endif
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#endif
#if PY_VERSION_HEX >= 0x030A0000
#include "internal/pycore_moduleobject.h"
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_dict.h"
#include "internal/pycore_object.h"
#endif
#if PY_VERSION_HEX < 0x030B0000
#include <longintrepr.h>
#endif

#define P(name, expr) printf("\t\t%s: %ld,\n", name, (long)(expr))

int main(void) {
	printf("\t{\n\t\tMinor: %d,\n", PY_MINOR_VERSION);
	P("RuntimeInterpHead", offsetof(_PyRuntimeState, interpreters.head));
	P("InterpNext", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
	P("InterpThreadsHead", offsetof(PyInterpreterState, threads.head));
#else
	P("InterpThreadsHead", offsetof(PyInterpreterState, tstate_head));
#endif
	P("ThreadNext", offsetof(PyThreadState, next));
	P("ThreadInterp", offsetof(PyThreadState, interp));
	P("ThreadID", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
	P("ThreadNativeID", offsetof(PyThreadState, native_thread_id));
#else
	P("ThreadNativeID", -1);
#endif
#if PY_VERSION_HEX >= 0x030D0000
	P("ThreadFrame", offsetof(PyThreadState, current_frame));
	P("CFrameCurrent", -1);
#elif PY_VERSION_HEX >= 0x030B0000
	P("ThreadFrame", offsetof(PyThreadState, cframe));
	P("CFrameCurrent", offsetof(_PyCFrame, current_frame));
#else
	P("ThreadFrame", offsetof(PyThreadState, frame));
	P("CFrameCurrent", -1);
#endif
#if PY_VERSION_HEX >= 0x030B0000
	P("FrameBack", offsetof(_PyInterpreterFrame, previous));
#if PY_VERSION_HEX >= 0x030D0000
	P("FrameCode", offsetof(_PyInterpreterFrame, f_executable));
	P("FrameInstr", offsetof(_PyInterpreterFrame, instr_ptr));
#else
	P("FrameCode", offsetof(_PyInterpreterFrame, f_code));
	P("FrameInstr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
	P("FrameOwner", offsetof(_PyInterpreterFrame, owner));
#if PY_VERSION_HEX >= 0x030C0000
	P("FrameIsEntry", -1);
	P("OwnedByCStack", FRAME_OWNED_BY_CSTACK);
#else
	P("FrameIsEntry", offsetof(_PyInterpreterFrame, is_entry));
	P("OwnedByCStack", -1);
#endif
	P("CodeAdaptive", offsetof(PyCodeObject, co_code_adaptive));
	P("CodeQualname", offsetof(PyCodeObject, co_qualname));
	P("CodeLinetable", offsetof(PyCodeObject, co_linetable));
#else
	P("FrameBack", offsetof(PyFrameObject, f_back));
	P("FrameCode", offsetof(PyFrameObject, f_code));
	P("FrameInstr", offsetof(PyFrameObject, f_lasti));
	P("FrameOwner", -1);
	P("FrameIsEntry", -1);
	P("OwnedByCStack", -1);
	P("CodeAdaptive", -1);
	P("CodeQualname", -1);
#if PY_VERSION_HEX >= 0x030A0000
	P("CodeLinetable", offsetof(PyCodeObject, co_linetable));
#else
	P("CodeLinetable", offsetof(PyCodeObject, co_lnotab));
#endif
#endif
	P("CodeFilename", offsetof(PyCodeObject, co_filename));
	P("CodeName", offsetof(PyCodeObject, co_name));
	P("CodeFirstLine", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030C0000
	P("RuntimeGIL", -1);
	P("InterpGIL", offsetof(PyInterpreterState, ceval.gil));
#else
	P("RuntimeGIL", offsetof(_PyRuntimeState, ceval.gil));
	P("InterpGIL", -1);
#endif
	P("GILLocked", offsetof(struct _gil_runtime_state, locked));
	P("GILLastHolder", offsetof(struct _gil_runtime_state, last_holder));
	P("ObType", offsetof(PyObject, ob_type));
	P("VarSize", offsetof(PyVarObject, ob_size));
	P("BytesData", offsetof(PyBytesObject, ob_sval));
	P("StrLength", offsetof(PyASCIIObject, length));
	P("StrState", offsetof(PyASCIIObject, state));
	P("StrASCIIData", sizeof(PyASCIIObject));
	P("StrCompactData", sizeof(PyCompactUnicodeObject));

	// The threads' threading names: the modules dict, a module's dict,
	// dicts, instances' attributes, ints.
#if PY_VERSION_HEX >= 0x030C0000
	P("InterpModules", offsetof(PyInterpreterState, imports.modules));
#else
	P("InterpModules", offsetof(PyInterpreterState, modules));
#endif
#if PY_VERSION_HEX >= 0x030A0000
	P("ModuleDict", offsetof(PyModuleObject, md_dict));
#else
	// (PyModuleObject is private to Objects/moduleobject.c before 3.10:
	// md_dict follows the object's header there)
	P("ModuleDict", sizeof(PyObject));
#endif
	P("DictKeys", offsetof(PyDictObject, ma_keys));
	P("DictValues", offsetof(PyDictObject, ma_values));
#if PY_VERSION_HEX >= 0x030B0000
	P("KeysSize", -1);
	P("KeysLog2Size", offsetof(PyDictKeysObject, dk_log2_size));
	P("KeysLog2IndexBytes", offsetof(PyDictKeysObject, dk_log2_index_bytes));
	P("KeysKind", offsetof(PyDictKeysObject, dk_kind));
	P("KeysNentries", offsetof(PyDictKeysObject, dk_nentries));
	P("KeysIndices", offsetof(PyDictKeysObject, dk_indices));
	P("ValuesValues", offsetof(PyDictValues, values));
	P("EntrySize", sizeof(PyDictKeyEntry));
	P("UnicodeEntrySize", sizeof(PyDictUnicodeEntry));
#else
	// (struct _dictkeysobject is private to Objects/dict-common.h before
	// 3.11: dk_refcnt, dk_size, dk_lookup, dk_usable, dk_nentries, then
	// dk_indices, each a word)
	P("KeysSize", sizeof(Py_ssize_t));
	P("KeysLog2Size", -1);
	P("KeysLog2IndexBytes", -1);
	P("KeysKind", -1);
	P("KeysNentries", 4 * sizeof(Py_ssize_t));
	P("KeysIndices", 5 * sizeof(Py_ssize_t));
	P("ValuesValues", 0); // (ma_values is the array itself)
	P("EntrySize", 3 * sizeof(void *)); // me_hash, me_key, me_value
	P("UnicodeEntrySize", -1);
#endif
	P("TypeFlags", offsetof(PyTypeObject, tp_flags));
	P("TypeBasicSize", offsetof(PyTypeObject, tp_basicsize));
	P("TypeDictOffset", offsetof(PyTypeObject, tp_dictoffset));
	P("HeapTypeCachedKeys", offsetof(PyHeapTypeObject, ht_cached_keys));
	P("FlagHeapType", Py_TPFLAGS_HEAPTYPE);
#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
	// (_PyObject_DictOrValuesPointer: three words before the object)
	P("FlagManagedDict", Py_TPFLAGS_MANAGED_DICT);
	P("ManagedDict", -3 * (long)sizeof(PyObject *));
#elif PY_VERSION_HEX >= 0x030B0000
	P("FlagManagedDict", Py_TPFLAGS_MANAGED_DICT);
	P("ManagedDict", MANAGED_DICT_OFFSET);
#else
	P("FlagManagedDict", 0);
	P("ManagedDict", 0);
#endif
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
	// (_PyObject_ValuesPointer: the word before the managed dict's)
	P("ManagedValues", MANAGED_DICT_OFFSET - (long)sizeof(PyObject *));
#else
	P("ManagedValues", 0);
#endif
#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
	// (PyDictOrValues: the managed dict's word holds a values pointer
	// minus one, its low bit set, or the dict)
	P("TaggedValues", 1);
#else
	P("TaggedValues", 0);
#endif
#if PY_VERSION_HEX >= 0x030D0000
	P("FlagInlineValues", Py_TPFLAGS_INLINE_VALUES);
	P("ValuesValid", offsetof(PyDictValues, valid));
#else
	P("FlagInlineValues", 0);
	P("ValuesValid", -1);
#endif
#if PY_VERSION_HEX >= 0x030C0000
	P("LongTag", offsetof(PyLongObject, long_value.lv_tag));
	P("LongDigits", offsetof(PyLongObject, long_value.ob_digit));
#else
	P("LongTag", -1);
	P("LongDigits", offsetof(PyLongObject, ob_digit));
#endif
	P("LongShift", PyLong_SHIFT);
	printf("\t},\n");
	return 0;
}
