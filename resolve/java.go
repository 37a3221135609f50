package resolve

import (
	"encoding/binary"
	"fmt"

	"stackshot/hotspot"
	"stackshot/internal/contain"
	"stackshot/internal/safeelf"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/unwind"
)

// A HotSpot JVM's code cache has no CFI and no file: the space opens the
// JVM (package hotspot, through its exported tables) the first time a
// walk or a name needs it, so its frames are walked by the layout of
// their code blobs and named as Java methods. This runs wherever the
// space does: in the sandboxed child for another user's process.

// javaState is a space's JVM, opened once.
type javaState struct {
	tried bool
	vm    *hotspot.VM
	err   error // why a JVM's tables could not be read (a warning)
}

// jvm returns the process's JVM, or nil when it is none or cannot be
// read (then a warning says why, once). It is read under --no-java too:
// the walk needs its code blobs' frame layouts to reach the native
// frames below the Java ones (only the Java frames are left out).
func (s *Space) jvm() *hotspot.VM {
	if s.java.tried {
		return s.java.vm
	}
	s.java.tried = true
	if s.mem == nil {
		return nil
	}
	m := s.libjvm()
	if m == nil {
		return nil
	}
	err := contain.Do("reading the JVM's tables", func() error {
		vm, err := s.openJVM(m)
		s.java.vm = vm
		return err
	})
	if err != nil {
		s.java.vm, s.java.err = nil, err
		s.warnings = append(s.warnings, fmt.Sprintf("Java frames not read (%v); showing native frames", err))
	}
	return s.java.vm
}

// libjvm is the first mapping of libjvm.so, or nil.
func (s *Space) libjvm() *procmaps.Mapping {
	for i := range s.maps {
		if m := &s.maps[i]; m.Kind == procmaps.KindFile && hotspot.IsLibJVM(m.Path) {
			return s.maps.FirstOfFile(m)
		}
	}
	return nil
}

// openJVM reads the tables of the JVM whose libjvm.so is mapped at m.
func (s *Space) openJVM(m *procmaps.Mapping) (*hotspot.VM, error) {
	var e *modEntry
	for i := range s.maps {
		if x := &s.maps[i]; x.Path == m.Path && x.Executable() {
			e = s.module(x)
			break
		}
	}
	if e == nil || e.mod == nil || e.mod.ELF() == nil || !e.ok {
		return nil, fmt.Errorf("%s cannot be opened", m.Path)
	}
	lib := e.mod.ELF()
	var sym map[string]uint64
	var err error
	if pf := safeelf.Parsed(lib); pf != nil {
		sym, err = hotspot.TableSymbolsELF(pf.File)
	} else {
		var size int64
		if size, err = safeelf.Size(lib); err == nil {
			sym, err = hotspot.TableSymbols(lib, size)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Path, err)
	}
	for k := range sym {
		sym[k] += e.bias
	}
	return hotspot.Open(s.mem, sym)
}

// jitCode is a JVM's code cache as the unwinder sees it.
type jitCode struct{ vm *hotspot.VM }

// JITFrame implements unwind.JITCode: the interpreter's frames and stubs
// without a frame size by frame pointer, compiled methods and stubs by
// their blob's frame size (once their prologue has set it up).
func (j jitCode) JITFrame(pc uint64, exact bool) (unwind.JITFrame, bool) {
	look := pc
	if !exact {
		look--
	}
	b := j.vm.BlobAt(look)
	if b == nil {
		return unwind.JITFrame{}, false
	}
	switch {
	case b.Kind == hotspot.BlobInterpreter:
		return unwind.JITFrame{Layout: unwind.JITFramePointer, SenderSPSlot: j.vm.SenderSPSlot()}, true
	case b.FrameSize > 0:
		if exact && pc < b.CodeBegin+b.FrameComplete {
			return unwind.JITFrame{}, false // its frame is not set up yet
		}
		return unwind.JITFrame{Layout: unwind.JITFixedSize, Size: b.FrameSize}, true
	}
	return unwind.JITFrame{Layout: unwind.JITFramePointer}, true
}

// javaFrames appends the frames that name a physical frame in the JVM's
// code cache: Java methods, or a stub's name; false when f is not there
// (or the JVM is not read).
func (s *Space) javaFrames(th *ptrace.Thread, out []report.Frame, f unwind.Frame) ([]report.Frame, bool) {
	vm := s.jvm()
	if vm == nil || !vm.InCodeCache(f.PC) {
		return out, false
	}
	read := func(addr uint64) (uint64, bool) {
		if addr >= th.StackAddr && addr+8 <= th.StackAddr+uint64(len(th.Stack)) {
			return binary.LittleEndian.Uint64(th.Stack[addr-th.StackAddr:]), true
		}
		var b [8]byte
		if n, _ := s.mem.ReadAt(b[:], int64(addr)); n < 8 {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	var fr []report.Frame
	if err := contain.Call("naming Java frames", func() { fr = vm.Frames(f.PC, f.Exact, f.FP, read) }); err != nil || len(fr) == 0 {
		return out, false
	}
	for i := range fr {
		fr[i].PC, fr[i].SP, fr[i].Method = f.PC, f.SP, f.Method.String()
		if fr[i].Kind == "user" {
			fr[i].Module = "[codecache]"
		}
		if s.r.opts.NoJava && fr[i].Kind == "java" {
			continue
		}
		out = append(out, fr[i])
	}
	return out, true
}

// javaThreads gives each thread of rp that is a JavaThread its Java name,
// and rp the runtime, after its threads were resolved.
func (s *Space) javaThreads(rp *report.Process) {
	vm := s.java.vm
	if vm == nil || s.r.opts.NoJava {
		return
	}
	if rp.Runtime == nil {
		rp.Runtime = &report.Runtime{Name: "java", Version: vm.Release()}
	}
	var ths []hotspot.Thread
	err := contain.Do("reading the JVM's threads", func() error {
		var err error
		ths, err = vm.Threads()
		return err
	})
	if err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Java thread names not read (%v)", err))
		return
	}
	byTID := make(map[int]*hotspot.Thread, len(ths))
	for i := range ths {
		byTID[ths[i].TID] = &ths[i]
	}
	var waits map[int]*hotspot.Wait
	if err := contain.Call("reading the JVM's monitors", func() { waits = vm.Waits(ths) }); err != nil {
		rp.Warnings = append(rp.Warnings, fmt.Sprintf("Java monitors not read (%v)", err))
	}
	for i := range rp.Threads {
		t := &rp.Threads[i]
		if jt := byTID[t.TID]; jt != nil {
			t.JavaName, t.JavaState = jt.Name, jt.State
		}
		if w := waits[t.TID]; w != nil {
			t.WaitingFor = &report.WaitingFor{Kind: w.Kind, Address: w.Object, Class: w.Class, Note: w.Note}
			if w.OwnerTID != 0 {
				o := w.OwnerTID
				t.WaitingFor.OwnerTID = &o
			}
		}
	}
}
