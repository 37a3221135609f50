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
	printf("\t},\n");
	return 0;
}
