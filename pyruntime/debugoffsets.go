package pyruntime

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// debugCookie starts _PyRuntime on CPython 3.13+: the _Py_DebugOffsets
// by which the runtime describes its own structures.
const debugCookie = "xdebugpy"

// debugOffsets is 3.13's _Py_DebugOffsets (Include/internal/
// pycore_runtime.h) up to the members read: every member a uint64. 3.14
// changed the structure: it is read for 3.13 only.
type debugOffsets struct {
	Cookie       [8]byte
	Version      uint64
	FreeThreaded uint64
	Runtime      struct{ Size, Finalizing, InterpretersHead uint64 }
	Interp       struct {
		Size, ID, Next, ThreadsHead, GC, ImportsModules, Sysdict, Builtins uint64
		CevalGIL, GILRuntimeState, GILEnabled, GILLocked, GILHolder        uint64
	}
	Thread struct {
		Size, Prev, Next, Interp, CurrentFrame, ThreadID, NativeThreadID, DatastackChunk, Status uint64
	}
	Frame struct{ Size, Previous, Executable, InstrPtr, Localsplus, Owner uint64 }
	Code  struct {
		Size, Filename, Name, Qualname, Linetable, FirstLineno, Argcount uint64
		LocalsplusNames, LocalsplusKinds, CodeAdaptive                   uint64
	}
	Object  struct{ Size, ObType uint64 }
	Type    struct{ Size, TpName, TpRepr, TpFlags uint64 }
	Tuple   struct{ Size, ObItem, ObSize uint64 }
	List    struct{ Size, ObItem, ObSize uint64 }
	Dict    struct{ Size, MaKeys, MaValues uint64 }
	Float   struct{ Size, ObFval uint64 }
	Long    struct{ Size, LvTag, ObDigit uint64 }
	Bytes   struct{ Size, ObSize, ObSval uint64 }
	Unicode struct{ Size, State, Length, ASCIIObjectSize uint64 }
}

// Bounds on the offsets believed: members of an object read at once
// (thread states, frames, code objects, strings, the GIL) lie within
// maxObjRead bytes of its start; the runtime's and an interpreter's
// within maxStateOffset.
const maxStateOffset = 1 << 20

// debugLayout is the layout the runtime at addr describes (3.13's
// _Py_DebugOffsets), its members the offsets do not give taken from
// table (the generated one of its release); ok false when _PyRuntime does
// not start with the cookie. An error: the offsets are there but do not
// check out (another release than version, a free-threaded build, an
// offset out of bounds).
func debugLayout(mem io.ReaderAt, addr uint64, version uint32, table *Layout) (l *Layout, ok bool, err error) {
	var d debugOffsets
	raw := make([]byte, binary.Size(&d))
	if _, err := mem.ReadAt(raw, int64(addr)); err != nil {
		return nil, false, nil
	}
	if !bytes.Equal(raw[:8], []byte(debugCookie)) {
		return nil, false, nil
	}
	if _, err := binary.Decode(raw, binary.LittleEndian, &d); err != nil {
		return nil, true, err
	}
	if version != 0 && d.Version != uint64(version) {
		return nil, true, fmt.Errorf("_Py_DebugOffsets are of release %s, Py_Version says %s", hexVersion(uint32(d.Version)), hexVersion(version))
	}
	if d.FreeThreaded != 0 {
		return nil, true, fmt.Errorf("a free-threaded build (its objects and thread states are laid out differently): its Python frames are not read")
	}
	if d.Interp.GILLocked < d.Interp.GILRuntimeState || d.Interp.GILHolder < d.Interp.GILRuntimeState {
		return nil, true, fmt.Errorf("_Py_DebugOffsets: the GIL's members lie before it")
	}
	c := *table
	c.RuntimeInterpHead = int(d.Runtime.InterpretersHead)
	c.InterpNext, c.InterpThreadsHead, c.InterpGIL = int(d.Interp.Next), int(d.Interp.ThreadsHead), int(d.Interp.CevalGIL)
	c.GILLocked = int(d.Interp.GILLocked - d.Interp.GILRuntimeState)
	c.GILLastHolder = int(d.Interp.GILHolder - d.Interp.GILRuntimeState)
	c.ThreadNext, c.ThreadInterp, c.ThreadFrame = int(d.Thread.Next), int(d.Thread.Interp), int(d.Thread.CurrentFrame)
	c.ThreadID, c.ThreadNativeID = int(d.Thread.ThreadID), int(d.Thread.NativeThreadID)
	c.FrameBack, c.FrameCode, c.FrameInstr, c.FrameOwner = int(d.Frame.Previous), int(d.Frame.Executable), int(d.Frame.InstrPtr), int(d.Frame.Owner)
	c.CodeFilename, c.CodeName, c.CodeQualname = int(d.Code.Filename), int(d.Code.Name), int(d.Code.Qualname)
	c.CodeLinetable, c.CodeFirstLine, c.CodeAdaptive = int(d.Code.Linetable), int(d.Code.FirstLineno), int(d.Code.CodeAdaptive)
	c.ObType, c.VarSize, c.BytesData = int(d.Object.ObType), int(d.Bytes.ObSize), int(d.Bytes.ObSval)
	c.StrState, c.StrLength, c.StrASCIIData = int(d.Unicode.State), int(d.Unicode.Length), int(d.Unicode.ASCIIObjectSize)
	c.InterpModules, c.DictKeys, c.DictValues = int(d.Interp.ImportsModules), int(d.Dict.MaKeys), int(d.Dict.MaValues)
	c.LongTag, c.LongDigits, c.TypeFlags = int(d.Long.LvTag), int(d.Long.ObDigit), int(d.Type.TpFlags)
	for _, v := range []uint64{d.Runtime.InterpretersHead, d.Interp.Next, d.Interp.ThreadsHead, d.Interp.CevalGIL, d.Interp.ImportsModules, d.Type.TpFlags} {
		if v > maxStateOffset {
			return nil, true, fmt.Errorf("_Py_DebugOffsets: offset %d out of bounds", v)
		}
	}
	for _, v := range []int{c.GILLocked, c.GILLastHolder, c.ThreadNext, c.ThreadInterp, c.ThreadFrame, c.ThreadID, c.ThreadNativeID,
		c.FrameBack, c.FrameCode, c.FrameInstr, c.FrameOwner, c.CodeFilename, c.CodeName, c.CodeQualname, c.CodeLinetable,
		c.CodeFirstLine, c.CodeAdaptive, c.ObType, c.VarSize, c.BytesData, c.StrState, c.StrLength, c.StrASCIIData,
		c.DictKeys, c.DictValues, c.LongTag, c.LongDigits} {
		if v < 0 || v > maxObjRead-8 {
			return nil, true, fmt.Errorf("_Py_DebugOffsets: offset %d out of bounds", v)
		}
	}
	if c.StrState+4 > c.StrCompactData || c.StrLength+8 > c.StrCompactData || c.ObType+8 > c.StrCompactData ||
		c.ObType+8 > c.BytesData || c.VarSize+8 > c.BytesData {
		return nil, true, fmt.Errorf("_Py_DebugOffsets: a str's or bytes' members lie past its header")
	}
	return &c, true, nil
}

// selfDescribed is the layout of a 3.13 runtime at addr: its own
// _Py_DebugOffsets where it has them (checked against the release that
// Py_Version at pyVersion says), else table. Other releases: table.
func selfDescribed(mem io.ReaderAt, addr, pyVersion uint64, table *Layout) (*Layout, bool, error) {
	if table.Minor != 13 {
		return table, false, nil
	}
	var v [4]byte
	if _, err := mem.ReadAt(v[:], int64(pyVersion)); err != nil || pyVersion == 0 {
		return table, false, nil
	}
	l, ok, err := debugLayout(mem, addr, binary.LittleEndian.Uint32(v[:]), table)
	if err != nil || !ok {
		return table, false, err
	}
	return l, true, nil
}
