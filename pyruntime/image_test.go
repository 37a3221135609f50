package pyruntime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"stackshot/report"
)

// A crafted memory image of a CPython process: one interpreter, one
// thread state, two frames running one code object, at fixed places from
// imgBase. The type objects' addresses are made up (never read).
const (
	imgBase    = 0x10000
	imgRuntime = imgBase
	imgInterp  = imgBase + 0x400
	imgTstate  = imgBase + 0x2200
	imgCFrame  = imgBase + 0x2400
	imgFrame1  = imgBase + 0x2500 // innermost
	imgFrame2  = imgBase + 0x2580
	imgCode    = imgBase + 0x2600
	imgName    = imgBase + 0x2800
	imgQual    = imgBase + 0x2900
	imgFile    = imgBase + 0x2a00
	imgTable   = imgBase + 0x2b00
	imgSize    = 0x2c00
	imgCodeTy  = 0x7000_0000
	imgStrTy   = 0x7000_1000
	imgBytesTy = 0x7000_2000
	imgTID     = 4242
)

// image is a process's memory from imgBase.
type image []byte

func (m image) ReadAt(b []byte, off int64) (int, error) {
	if off < imgBase || off-imgBase > int64(len(m)) || int64(len(b)) > int64(len(m))-(off-imgBase) {
		return 0, errors.New("unmapped")
	}
	return copy(b, m[off-imgBase:]), nil
}

// buildImage writes the image for layout l: frame 1 (not an entry frame)
// at instruction offset addr1, frame 2 (the entry frame) at addr2, both
// of code "Repo.fetch_rows" in /srv/app/repo.py, first line 10, table.
func buildImage(l *Layout, table []byte, addr1, addr2 int64) image {
	m := make(image, imgSize)
	le := binary.LittleEndian
	put := func(at uint64, off int, v uint64) {
		if off >= 0 {
			le.PutUint64(m[at-imgBase+uint64(off):], v)
		}
	}
	put(imgRuntime, l.RuntimeInterpHead, imgInterp)
	put(imgInterp, l.InterpThreadsHead, imgTstate)
	put(imgTstate, l.ThreadInterp, imgInterp)
	put(imgTstate, l.ThreadID, 0x7fff_0000)
	put(imgTstate, l.ThreadNativeID, imgTID)
	if l.CFrameCurrent >= 0 {
		put(imgTstate, l.ThreadFrame, imgCFrame)
		put(imgCFrame, l.CFrameCurrent, imgFrame1)
	} else {
		put(imgTstate, l.ThreadFrame, imgFrame1)
	}
	for i, f := range []uint64{imgFrame1, imgFrame2} {
		addr := []int64{addr1, addr2}[i]
		put(f, l.FrameCode, imgCode)
		if i == 0 {
			put(f, l.FrameBack, imgFrame2)
		}
		switch {
		case l.Minor <= 9:
			le.PutUint32(m[f-imgBase+uint64(l.FrameInstr):], uint32(addr))
		case l.Minor == 10:
			le.PutUint32(m[f-imgBase+uint64(l.FrameInstr):], uint32(addr/2))
		default:
			put(f, l.FrameInstr, uint64(int64(imgCode+uint64(l.CodeAdaptive))+addr))
		}
		if l.FrameIsEntry >= 0 && i == 1 {
			m[f-imgBase+uint64(l.FrameIsEntry)] = 1
		}
	}
	put(imgCode, l.ObType, imgCodeTy)
	put(imgCode, l.CodeName, imgName)
	put(imgCode, l.CodeQualname, imgQual)
	put(imgCode, l.CodeFilename, imgFile)
	put(imgCode, l.CodeLinetable, imgTable)
	le.PutUint32(m[imgCode-imgBase+uint64(l.CodeFirstLine):], 10)
	for at, s := range map[uint64]string{imgName: "fetch_rows", imgQual: "Repo.fetch_rows", imgFile: "/srv/app/repo.py"} {
		put(at, l.ObType, imgStrTy)
		put(at, l.StrLength, uint64(len(s)))
		le.PutUint32(m[at-imgBase+uint64(l.StrState):], 1<<2|1<<5|1<<6) // kind 1, compact, ascii
		copy(m[at-imgBase+uint64(l.StrASCIIData):], s)
	}
	put(imgTable, l.ObType, imgBytesTy)
	put(imgTable, l.VarSize, uint64(len(table)))
	copy(m[imgTable-imgBase+uint64(l.BytesData):], table)
	return m
}

func imageRuntime(m image, l *Layout) *Runtime {
	return &Runtime{Version: fmt.Sprintf("3.%d.0", l.Minor), Layout: l, Mem: m, runtime: imgRuntime,
		codeType: imgCodeTy, strType: imgStrTy, bytType: imgBytesTy}
}

// tables are line tables in each format mapping instruction offsets
// [0,6) to line 12 and [6,10) to line 13 of code whose first line is 10.
func tableFor(minor int) []byte {
	switch {
	case minor <= 9: // co_lnotab: (addr incr, line incr): +0 +2, +6 +1
		return []byte{0, 2, 6, 1}
	case minor == 10: // 3.10 co_linetable: (range length, line delta)
		return []byte{6, 2, 4, 1}
	}
	// 3.11+ location table:
	//   0xea = entry | code 13 (no columns) | 3 units; svarint +2 = 0x04
	//   0xd9 = entry | code 11 (one line, delta 1) | 2 units; columns 0, 5
	return []byte{0xea, 0x04, 0xd9, 0x00, 0x05}
}

// TestImageFrames reads a crafted image of each release's layout: the
// names, the file, the lines the hand-written tables give, and one run of
// two frames for one eval call.
func TestImageFrames(t *testing.T) {
	for i := range layouts {
		l := &layouts[i]
		t.Run(fmt.Sprintf("3.%d", l.Minor), func(t *testing.T) {
			rt := imageRuntime(buildImage(l, tableFor(l.Minor), 8, 2), l)
			ths, err := rt.Threads()
			if err != nil || len(ths) != 1 {
				t.Fatalf("threads %+v, %v", ths, err)
			}
			th := ths[0]
			qual := "Repo.fetch_rows"
			if l.Minor < 11 {
				qual = "fetch_rows"
			}
			want := []Frame{{Name: "fetch_rows", QualName: qual, File: "/srv/app/repo.py", Line: 13, Entry: l.Minor <= 10},
				{Name: "fetch_rows", QualName: qual, File: "/srv/app/repo.py", Line: 12, Entry: true}}
			if th.Err != nil || th.Moved || fmt.Sprint(th.Frames) != fmt.Sprint(want) {
				t.Fatalf("frames %+v (err %v, moved %v), want %+v", th.Frames, th.Err, th.Moved, want)
			}
			if l.Minor >= 11 && th.NativeID != imgTID {
				t.Errorf("native id %d, want %d", th.NativeID, imgTID)
			}
		})
	}
}

// TestInline: the runs go just inside their eval frames, innermost first.
func TestInline(t *testing.T) {
	nat := func(fn string) report.Frame { return report.Frame{Kind: "user", Function: fn} }
	th := report.Thread{Frames: []report.Frame{nat("sleep"), nat("_PyEval_EvalFrameDefault"), nat("qsort"),
		nat("_PyEval_EvalFrameDefault.cold"), nat("main")}}
	pt := Thread{Frames: []Frame{{QualName: "a", Entry: true}, {QualName: "b"}, {QualName: "c", Entry: true}}}
	if why := Inline(&th, &pt); why != "" {
		t.Fatal(why)
	}
	var got []string
	for _, f := range th.Frames {
		got = append(got, f.Function)
	}
	want := "sleep a _PyEval_EvalFrameDefault qsort b c _PyEval_EvalFrameDefault.cold main"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", strings.Join(got, " "), want)
	}
}

// TestImageGarbage: a thread state that points into nothing, and a
// frame chain that loops, end with errors, not hangs.
func TestImageGarbage(t *testing.T) {
	l := layoutFor(11)
	m := buildImage(l, tableFor(11), 8, 2)
	binary.LittleEndian.PutUint64(m[imgFrame2-imgBase+uint64(l.FrameBack):], imgFrame1) // a loop
	th, err := imageRuntime(m, l).Threads()
	if err != nil || len(th) != 1 || th[0].Err == nil || !strings.Contains(th[0].Err.Error(), "loops") {
		t.Fatalf("a looping chain: %+v %v", th, err)
	}
	binary.LittleEndian.PutUint64(m[imgRuntime-imgBase+uint64(l.RuntimeInterpHead):], 0xdead0000)
	if _, err := imageRuntime(m, l).Threads(); err == nil {
		t.Fatal("an interpreter in unmapped memory read without an error")
	}
}

// FuzzThreads (seeds in testdata/fuzz/FuzzThreads: the images below):
// whatever the process's memory holds, reading its threads
// ends, without a panic, with bounded frames. The first byte picks the
// release's layout; the rest is the image.
func FuzzThreads(f *testing.F) {
	for i := range layouts {
		l := &layouts[i]
		f.Add(append([]byte{byte(i)}, buildImage(l, tableFor(l.Minor), 8, 2)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 || len(data) > 1<<16 {
			return
		}
		l := &layouts[int(data[0])%len(layouts)]
		ths, _ := imageRuntime(image(data[1:]), l).Threads()
		for i := range ths {
			if len(ths[i].Frames) > MaxFrames {
				t.Fatalf("%d frames", len(ths[i].Frames))
			}
			rt := report.Thread{Frames: []report.Frame{{Kind: "user", Function: "_PyEval_EvalFrameDefault"}}}
			Inline(&rt, &ths[i])
		}
	})
}
