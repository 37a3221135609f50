package pyruntime

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"stackshot/internal/testutil"
)

// debugImage is the image of a 3.13 process (buildImage) whose _PyRuntime
// starts with the _Py_DebugOffsets that describe layout l, of release
// 3.13.0.
func debugImage(l *Layout) []byte {
	var d debugOffsets
	copy(d.Cookie[:], debugCookie)
	d.Version = 0x030D00F0
	d.Runtime.InterpretersHead = uint64(l.RuntimeInterpHead)
	const gil = 4096 // (where the interpreter's own GIL would be)
	d.Interp.Next, d.Interp.ThreadsHead, d.Interp.CevalGIL = uint64(l.InterpNext), uint64(l.InterpThreadsHead), uint64(l.InterpGIL)
	d.Interp.GILRuntimeState, d.Interp.GILLocked, d.Interp.GILHolder = gil, gil+uint64(l.GILLocked), gil+uint64(l.GILLastHolder)
	d.Thread.Next, d.Thread.Interp, d.Thread.CurrentFrame = uint64(l.ThreadNext), uint64(l.ThreadInterp), uint64(l.ThreadFrame)
	d.Thread.ThreadID, d.Thread.NativeThreadID = uint64(l.ThreadID), uint64(l.ThreadNativeID)
	d.Frame.Previous, d.Frame.Executable, d.Frame.InstrPtr, d.Frame.Owner = uint64(l.FrameBack), uint64(l.FrameCode), uint64(l.FrameInstr), uint64(l.FrameOwner)
	d.Code.Filename, d.Code.Name, d.Code.Qualname = uint64(l.CodeFilename), uint64(l.CodeName), uint64(l.CodeQualname)
	d.Code.Linetable, d.Code.FirstLineno, d.Code.CodeAdaptive = uint64(l.CodeLinetable), uint64(l.CodeFirstLine), uint64(l.CodeAdaptive)
	d.Object.ObType, d.Bytes.ObSize, d.Bytes.ObSval = uint64(l.ObType), uint64(l.VarSize), uint64(l.BytesData)
	d.Unicode.State, d.Unicode.Length, d.Unicode.ASCIIObjectSize = uint64(l.StrState), uint64(l.StrLength), uint64(l.StrASCIIData)
	d.Interp.ImportsModules, d.Dict.MaKeys, d.Dict.MaValues = uint64(l.InterpModules), uint64(l.DictKeys), uint64(l.DictValues)
	d.Long.LvTag, d.Long.ObDigit, d.Type.TpFlags = uint64(l.LongTag), uint64(l.LongDigits), uint64(l.TypeFlags)
	img := buildImage(l, tableFor(l.Minor), 8, 2)
	binary.Encode(img[imgRuntime-imgBase:], binary.LittleEndian, &d)
	return img
}

// TestDebugLayout: offsets that describe the table give the table back;
// another release, a free-threaded build, an offset past what is read of
// an object are errors; no cookie is no account.
func TestDebugLayout(t *testing.T) {
	table := layoutFor(13)
	img := debugImage(table)
	l, ok, err := debugLayout(image(img), imgRuntime, 0x030D00F0, table)
	if err != nil || !ok || *l != *table {
		t.Fatalf("debugLayout: %+v, %v, %v; want the table", l, ok, err)
	}
	ths, err := imageRuntime(image(img), l).Threads()
	if err != nil || len(ths) == 0 {
		t.Errorf("threads read by the offsets: %d, %v", len(ths), err)
	}
	at := func(field int) []byte { // a copy with the uint64 at field changed
		c := append([]byte(nil), img...)
		binary.LittleEndian.PutUint64(c[imgRuntime-imgBase+8*field:], 1<<40)
		return c
	}
	for name, c := range map[string][]byte{
		"release":       at(1),
		"free-threaded": at(2),
		"thread next":   at(3 + 3 + 13 + 2),
	} {
		if _, ok, err := debugLayout(image(c), imgRuntime, 0x030D00F0, table); err == nil || !ok {
			t.Errorf("%s changed: no error", name)
		}
	}
	c := append([]byte(nil), img...)
	c[imgRuntime-imgBase] = 'y'
	if _, ok, err := debugLayout(image(c), imgRuntime, 0x030D00F0, table); ok || err != nil {
		t.Errorf("no cookie: ok %v, %v", ok, err)
	}
}

// FuzzDebugOffsets (seeds in testdata/fuzz/FuzzDebugOffsets): whatever
// _PyRuntime's first bytes hold, the offsets believed never make the
// reader read past what it fetched of an object: reading the threads and
// their names by them ends without a panic. An input is a patch of at
// most 256 bytes over the image (testutil.Patched): the whole image as the
// input ran at one execution a second.
func FuzzDebugOffsets(f *testing.F) {
	img := debugImage(layoutFor(13))
	var work []byte
	f.Fuzz(func(t *testing.T, off uint32, patch []byte) {
		if len(patch) > 256 {
			return
		}
		work = testutil.Patched(work, img, off, patch)
		l, ok, err := debugLayout(image(work), imgRuntime, 0, layoutFor(13))
		if !ok || err != nil {
			return
		}
		rt := imageRuntime(image(work), l)
		ths, _ := rt.Threads()
		rt.Names(ths)
		for i := range ths {
			if len(ths[i].Frames) > MaxFrames || len(ths[i].Name) > MaxName {
				t.Fatalf("%d frames, name %q", len(ths[i].Frames), ths[i].Name)
			}
		}
	})
}

// TestUpdateDebugOffsetsSeeds rewrites testdata/fuzz/FuzzDebugOffsets when
// run with -update-seeds: the image as built, and its _Py_DebugOffsets
// rewritten with themselves, 256 bytes at a time.
func TestUpdateDebugOffsetsSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("rewrites the seed corpus only with -update-seeds")
	}
	dir := seedDir(t, "FuzzDebugOffsets")
	img := debugImage(layoutFor(13))
	n := binary.Size(debugOffsets{})
	for o := -256; o < n; o += 256 {
		var patch []byte
		at := max(o, 0)
		if o >= 0 {
			patch = img[imgRuntime-imgBase+o : imgRuntime-imgBase+min(o+256, n)]
		}
		b := fmt.Sprintf("go test fuzz v1\nuint32(%d)\n[]byte(%s)\n", imgRuntime-imgBase+at, strconv.Quote(string(patch)))
		name := fmt.Sprintf("offsets-%04x", at)
		if o < 0 {
			name = "image"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
