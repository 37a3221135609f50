package pyruntime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on what is read: a chain longer than these is not believed.
const (
	maxInterps = 256
	maxThreads = 8192
	// MaxFrames is the number of Python frames read per thread; a deeper
	// stack is cut there, and the thread says so.
	MaxFrames  = 4096
	maxString  = 4096    // characters of a name or file name
	maxTable   = 1 << 20 // bytes of a line table
	readTries  = 3       // reads of a thread whose innermost frame moved meanwhile
	maxObjRead = 256     // bytes of one object's header read at once
)

// Frame is one Python frame.
type Frame struct {
	Name     string // co_name
	QualName string // co_qualname (3.11+), else co_name
	File     string // co_filename
	Line     int    // 0 unknown
	// Entry marks the outermost frame of one call of the interpreter's
	// eval function: this frame and those inside it (before it in the
	// list, up to the previous Entry) run in one _PyEval_EvalFrameDefault
	// call on the native stack.
	Entry bool
}

// Thread is one Python thread state and its frames.
type Thread struct {
	Interp   int    // the interpreter's index in _PyRuntime's list (newest first)
	ThreadID uint64 // thread_id: the thread's pthread_t
	NativeID int    // native_thread_id (3.11+), the thread's tid; 0 unknown
	// Name is the thread's threading name (Names); "" unknown.
	Name   string
	interp uint64 // the interpreter's address
	// HoldsGIL: the GIL is locked, and this thread state last took it.
	HoldsGIL bool
	Frames   []Frame
	// Moved says the frames kept changing while read (a running thread):
	// Frames are those of the last read.
	Moved bool
	// Err says why Frames are empty or incomplete; nil when whole.
	Err error
}

// reader reads one snapshot of the interpreter's threads.
type reader struct {
	rt    *Runtime
	l     *Layout
	buf   [maxObjRead]byte
	codes map[uint64]*code
	// budget is what is left of the dict entries Names may visit;
	// classes and splitAt what it read once of classes and shared keys.
	budget  int
	classes map[uint64]*class
	splitAt map[splitKey]int
}

// code is what a code object gives a frame.
type code struct {
	name, qualname, file string
	first                int
	table                []byte
	err                  error
}

var errZero = errors.New("null pointer")

func (r *reader) read(addr uint64, n int) ([]byte, error) {
	if addr == 0 {
		return nil, errZero
	}
	if n < 0 || n > len(r.buf) { // (a 3.13 runtime's own offsets can ask for it)
		return nil, fmt.Errorf("reading %#x: %d bytes, more than an object's %d", addr, n, len(r.buf))
	}
	b := r.buf[:n]
	if _, err := r.rt.Mem.ReadAt(b, int64(addr)); err != nil {
		return nil, fmt.Errorf("reading %#x: %w", addr, err)
	}
	return b, nil
}

func (r *reader) u64(addr uint64) (uint64, error) {
	b, err := r.read(addr, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// Threads reads every thread state of every interpreter, with its frames.
func (rt *Runtime) Threads() ([]Thread, error) {
	r := &reader{rt: rt, l: rt.Layout, codes: map[uint64]*code{}}
	interp, err := r.u64(rt.runtime + uint64(r.l.RuntimeInterpHead))
	if err != nil {
		return nil, fmt.Errorf("_PyRuntime: %v", err)
	}
	var out []Thread
	seen := map[uint64]bool{}
	for i := 0; interp != 0; i++ {
		if i == maxInterps || seen[interp] {
			return out, fmt.Errorf("the interpreter list does not end within %d entries", maxInterps)
		}
		seen[interp] = true
		ts, err := r.u64(interp + uint64(r.l.InterpThreadsHead))
		if err != nil {
			return out, fmt.Errorf("interpreter %#x: %v", interp, err)
		}
		holder := r.gilHolder(interp)
		for ts != 0 {
			if len(out) == maxThreads || seen[ts] {
				return out, fmt.Errorf("the thread list of interpreter %#x does not end within %d entries", interp, maxThreads)
			}
			seen[ts] = true
			th, next, err := r.thread(interp, ts)
			if err != nil {
				return out, err
			}
			th.Interp, th.HoldsGIL, th.interp = i, ts == holder, interp
			out = append(out, th)
			ts = next
		}
		if interp, err = r.u64(interp + uint64(r.l.InterpNext)); err != nil {
			return out, fmt.Errorf("interpreter %#x: %v", interp, err)
		}
	}
	return out, nil
}

// gilHolder is the thread state that holds interpreter interp's GIL, 0
// when it is not locked (or cannot be read).
func (r *reader) gilHolder(interp uint64) uint64 {
	l := r.l
	gil := r.rt.runtime + uint64(l.RuntimeGIL)
	if l.RuntimeGIL < 0 {
		var err error
		if gil, err = r.u64(interp + uint64(l.InterpGIL)); err != nil {
			return 0
		}
	}
	b, err := r.read(gil, max(l.GILLocked+4, l.GILLastHolder+8))
	if err != nil || binary.LittleEndian.Uint32(b[l.GILLocked:]) == 0 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[l.GILLastHolder:])
}

// thread reads thread state ts: its ids, frames, and the next state.
// An error is a thread state that does not check out (the list cannot
// be followed past it); a thread whose frames do not is returned with Err.
func (r *reader) thread(interp, ts uint64) (th Thread, next uint64, err error) {
	l := r.l
	b, err := r.read(ts, max(l.ThreadNext, l.ThreadInterp, l.ThreadID, l.ThreadNativeID, l.ThreadFrame)+8)
	if err != nil {
		return th, 0, fmt.Errorf("thread state %#x: %v", ts, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(b[l.ThreadInterp:]); got != interp {
		return th, 0, fmt.Errorf("thread state %#x belongs to interpreter %#x, not %#x", ts, got, interp)
	}
	next, th.ThreadID = le.Uint64(b[l.ThreadNext:]), le.Uint64(b[l.ThreadID:])
	if l.ThreadNativeID >= 0 {
		if id := le.Uint64(b[l.ThreadNativeID:]); id > 0 && id < 1<<22 { // (PID_MAX_LIMIT)
			th.NativeID = int(id)
		}
	}
	for try := 0; try < readTries; try++ {
		head, mark, err := r.head(ts)
		if err != nil {
			th.Err = err
			return th, next, nil
		}
		th.Frames, th.Err = r.frames(head)
		head2, mark2, err := r.head(ts)
		if th.Moved = err != nil || head2 != head || mark2 != mark; !th.Moved {
			break
		}
	}
	return th, next, nil
}

// head is thread state ts's innermost frame and that frame's instruction
// pointer (or f_lasti): what moves when the thread runs Python code.
func (r *reader) head(ts uint64) (frame, mark uint64, err error) {
	l := r.l
	p, err := r.u64(ts + uint64(l.ThreadFrame))
	if err != nil {
		return 0, 0, fmt.Errorf("thread state %#x: %v", ts, err)
	}
	if l.CFrameCurrent >= 0 && p != 0 {
		if p, err = r.u64(p + uint64(l.CFrameCurrent)); err != nil {
			return 0, 0, fmt.Errorf("thread state %#x's cframe: %v", ts, err)
		}
	}
	if p == 0 {
		return 0, 0, nil
	}
	mark, err = r.u64(p + uint64(l.FrameInstr))
	return p, mark, err
}

// frames walks the frame chain from f, innermost first.
func (r *reader) frames(f uint64) ([]Frame, error) {
	l := r.l
	var out []Frame
	seen := map[uint64]bool{}
	le := binary.LittleEndian
	n := max(l.FrameBack, l.FrameCode, l.FrameInstr, l.FrameOwner, l.FrameIsEntry) + 8
	for f != 0 {
		if seen[f] {
			return out, fmt.Errorf("the frame chain loops at %#x", f)
		}
		if len(out) == MaxFrames {
			return out, fmt.Errorf("more than %d Python frames: the outermost are not shown", MaxFrames)
		}
		seen[f] = true
		b, err := r.read(f, n)
		if err != nil {
			return out, fmt.Errorf("frame %#x: %v", f, err)
		}
		back := le.Uint64(b[l.FrameBack:])
		if l.OwnedByCStack >= 0 && int(b[l.FrameOwner]) == l.OwnedByCStack {
			if len(out) > 0 {
				out[len(out)-1].Entry = true
			}
			f = back
			continue
		}
		codeAddr := le.Uint64(b[l.FrameCode:])
		instr := le.Uint64(b[l.FrameInstr:])
		entry := l.FrameIsEntry < 0 && l.OwnedByCStack < 0 || l.FrameIsEntry >= 0 && b[l.FrameIsEntry] != 0
		c := r.code(codeAddr)
		if c.err != nil {
			return out, fmt.Errorf("frame %#x: code object %#x: %v", f, codeAddr, c.err)
		}
		out = append(out, Frame{Name: c.name, QualName: c.qualname, File: c.file, Line: c.line(l.Minor, r.addrq(codeAddr, instr)), Entry: entry})
		f = back
	}
	if len(out) > 0 {
		out[len(out)-1].Entry = true
	}
	return out, nil
}

// addrq is the byte offset of a frame's instruction in its code: f_lasti
// (3.8, 3.9: bytes; 3.10: code units), or the instruction pointer's
// distance from the code's instructions (3.11+: prev_instr, whose line is
// that of the instruction before the next; 3.13's instr_ptr is the
// instruction itself). Negative: the frame has not started.
func (r *reader) addrq(codeAddr, instr uint64) int64 {
	switch {
	case r.l.Minor <= 9:
		return int64(int32(instr))
	case r.l.Minor == 10:
		return 2 * int64(int32(instr))
	}
	return int64(instr) - int64(codeAddr+uint64(r.l.CodeAdaptive))
}

// code reads (once per snapshot) the code object at addr.
func (r *reader) code(addr uint64) *code {
	if c, ok := r.codes[addr]; ok {
		return c
	}
	c := &code{}
	r.codes[addr] = c
	l := r.l
	b, err := r.read(addr, max(l.ObType, l.CodeQualname, l.CodeLinetable, l.CodeFilename, l.CodeName, l.CodeFirstLine)+8)
	if err != nil {
		c.err = err
		return c
	}
	le := binary.LittleEndian
	if le.Uint64(b[l.ObType:]) != r.rt.codeType {
		c.err = errors.New("not a code object")
		return c
	}
	c.first = int(int32(le.Uint32(b[l.CodeFirstLine:])))
	name, file, table := le.Uint64(b[l.CodeName:]), le.Uint64(b[l.CodeFilename:]), le.Uint64(b[l.CodeLinetable:])
	qual := name
	if l.CodeQualname >= 0 {
		qual = le.Uint64(b[l.CodeQualname:])
	}
	if c.name, err = r.str(name); err == nil {
		if c.qualname, err = r.str(qual); err == nil {
			if c.file, err = r.str(file); err == nil {
				c.table, err = r.bytes(table)
			}
		}
	}
	c.err = err
	return c
}

// str reads the str object at addr: a compact one (code objects' names
// are), each of its three kinds of characters.
func (r *reader) str(addr uint64) (string, error) { return r.strN(addr, maxString, false) }

// strN reads the str object at addr, of at most limit characters: a longer
// one is an error, or when cut its first limit characters.
func (r *reader) strN(addr uint64, limit int64, cut bool) (string, error) {
	l := r.l
	b, err := r.read(addr, l.StrCompactData)
	if err != nil {
		return "", err
	}
	le := binary.LittleEndian
	if le.Uint64(b[l.ObType:]) != r.rt.strType {
		return "", fmt.Errorf("%#x is not a str", addr)
	}
	n := int64(le.Uint64(b[l.StrLength:]))
	state := le.Uint32(b[l.StrState:])
	kind, compact, ascii := int(state>>2&7), state>>5&1 == 1, state>>6&1 == 1
	if cut && n > limit {
		n = limit
	}
	if n < 0 || n > limit || !compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1) {
		return "", fmt.Errorf("str %#x: length %d, state %#x not read", addr, n, state)
	}
	data := addr + uint64(l.StrCompactData)
	if ascii {
		data = addr + uint64(l.StrASCIIData)
	}
	raw := make([]byte, int(n)*kind)
	if _, err := r.rt.Mem.ReadAt(raw, int64(data)); err != nil && n > 0 {
		return "", fmt.Errorf("str %#x: %w", addr, err)
	}
	if kind == 1 && ascii {
		return strings.ToValidUTF8(string(raw), "\uFFFD"), nil
	}
	var s strings.Builder
	s.Grow(len(raw))
	for i := 0; i < len(raw); i += kind {
		c := rune(raw[i])
		switch kind {
		case 2:
			c = rune(le.Uint16(raw[i:]))
		case 4:
			c = rune(le.Uint32(raw[i:]))
		}
		if !utf8.ValidRune(c) {
			c = utf8.RuneError
		}
		s.WriteRune(c)
	}
	return s.String(), nil
}

// bytes reads the bytes object at addr.
func (r *reader) bytes(addr uint64) ([]byte, error) {
	l := r.l
	b, err := r.read(addr, l.BytesData)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if le.Uint64(b[l.ObType:]) != r.rt.bytType {
		return nil, fmt.Errorf("%#x is not bytes", addr)
	}
	n := int64(le.Uint64(b[l.VarSize:]))
	if n < 0 || n > maxTable {
		return nil, fmt.Errorf("bytes %#x: length %d not read", addr, n)
	}
	out := make([]byte, n)
	if _, err := r.rt.Mem.ReadAt(out, int64(addr)+int64(l.BytesData)); err != nil && n > 0 {
		return nil, fmt.Errorf("bytes %#x: %w", addr, err)
	}
	return out, nil
}
