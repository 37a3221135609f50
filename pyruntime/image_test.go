package pyruntime

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"stackshot/internal/testutil"
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
	imgCodeTy  = 0x7000_0000
	imgStrTy   = 0x7000_1000
	imgBytesTy = 0x7000_2000
	imgModTy   = 0x7000_3000
	imgDictTy  = 0x7000_4000
	imgLongTy  = 0x7000_5000
	imgTID     = 4242
	imgIdent   = 0x7fff_1234_5000 // the thread's pthread_t: 2 digits of 30 bits

	// The threading names' objects: sys.modules {"os": 1, "threading":
	// module}, the module's globals {"_active": _active}, _active {ident:
	// Thread object}, its attributes {"_name": "worker-1"}, each dict at
	// +0 of its place and its keys at +0x80; the Thread's class.
	imgModules = imgBase + 0x2c00
	imgModule  = imgBase + 0x2d00
	imgGlobals = imgBase + 0x2e00
	imgActive  = imgBase + 0x2f00
	imgAttrs   = imgBase + 0x3000
	imgThread  = imgBase + 0x3120 // (0x20 before it: a managed dict's place)
	imgLong    = imgBase + 0x3180
	imgStrs    = imgBase + 0x3200 // "os", "threading", "_active", "_name", "worker-1": 0x80 apart
	imgClass   = imgBase + 0x3500
	imgSize    = 0x3900
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
	putNames(m, l)
	return m
}

// putNames writes the objects of the thread's threading name (see
// imgModules) for layout l: every dict a combined one of general
// entries, the instance's attributes in its __dict__ (3.8-3.10) or its
// managed dict (3.11+).
func putNames(m image, l *Layout) {
	le := binary.LittleEndian
	put := func(at uint64, off int, v uint64) { le.PutUint64(m[at-imgBase+uint64(off):], v) }
	strs := map[string]uint64{}
	for i, s := range []string{"os", "threading", "_active", "_name", "worker-1"} {
		at := imgStrs + uint64(i)*0x80
		strs[s] = at
		put(at, l.ObType, imgStrTy)
		put(at, l.StrLength, uint64(len(s)))
		le.PutUint32(m[at-imgBase+uint64(l.StrState):], 1<<2|1<<5|1<<6)
		copy(m[at-imgBase+uint64(l.StrASCIIData):], s)
	}
	dict := func(at uint64, kv ...uint64) {
		keys := at + 0x80
		put(at, l.ObType, imgDictTy)
		put(at, l.DictKeys, keys)
		if l.KeysSize >= 0 {
			put(keys, l.KeysSize, 8)
		} else {
			m[keys-imgBase+uint64(l.KeysLog2Size)] = 3
			m[keys-imgBase+uint64(l.KeysLog2IndexBytes)] = 3
		}
		put(keys, l.KeysNentries, uint64(len(kv)/2))
		for i := 0; i < len(kv); i += 2 {
			e := keys + uint64(l.KeysIndices) + 8 + uint64(i/2*l.EntrySize)
			put(e, 8, kv[i])
			put(e, 16, kv[i+1])
		}
	}
	put(imgInterp, l.InterpModules, imgModules)
	dict(imgModules, strs["os"], 1, strs["threading"], imgModule)
	put(imgModule, l.ObType, imgModTy)
	put(imgModule, l.ModuleDict, imgGlobals)
	dict(imgGlobals, strs["_active"], imgActive)
	dict(imgActive, imgLong, imgThread)
	put(imgLong, l.ObType, imgLongTy)
	if l.LongTag >= 0 {
		put(imgLong, l.LongTag, 2<<3)
	} else {
		put(imgLong, l.VarSize, 2)
	}
	le.PutUint32(m[imgLong-imgBase+uint64(l.LongDigits):], uint32(uint64(imgIdent)&(1<<l.LongShift-1)))
	le.PutUint32(m[imgLong-imgBase+uint64(l.LongDigits)+4:], uint32(uint64(imgIdent)>>l.LongShift))
	dict(imgAttrs, strs["_name"], strs["worker-1"])
	put(imgThread, l.ObType, imgClass)
	put(imgClass, l.TypeFlags, uint64(l.FlagHeapType|l.FlagManagedDict))
	put(imgClass, l.TypeBasicSize, 16)
	if l.FlagManagedDict != 0 {
		put(imgThread, l.ManagedDict, imgAttrs) // (negative: before it)
	} else {
		put(imgClass, l.TypeDictOffset, 16)
		put(imgThread, 16, imgAttrs)
	}
	put(imgTstate, l.ThreadID, imgIdent)
}

func imageRuntime(m image, l *Layout) *Runtime {
	return &Runtime{Version: fmt.Sprintf("3.%d.0", l.Minor), Layout: l, Mem: m, runtime: imgRuntime,
		codeType: imgCodeTy, strType: imgStrTy, bytType: imgBytesTy, modType: imgModTy, dictType: imgDictTy, longType: imgLongTy}
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

// TestImageNames reads the thread's threading name from a crafted image
// of each release's layout; a structure that does not check out names
// no thread, with an error; no threading module is no name, no error.
func TestImageNames(t *testing.T) {
	for i := range layouts {
		l := &layouts[i]
		t.Run(fmt.Sprintf("3.%d", l.Minor), func(t *testing.T) {
			m := buildImage(l, tableFor(l.Minor), 8, 2)
			rt := imageRuntime(m, l)
			ths, err := rt.Threads()
			if err != nil || len(ths) != 1 {
				t.Fatalf("threads %+v, %v", ths, err)
			}
			if err := rt.Names(ths); err != nil || ths[0].Name != "worker-1" {
				t.Fatalf("name %q, %v; want worker-1", ths[0].Name, err)
			}
			le := binary.LittleEndian
			control := []Thread{{ThreadID: imgIdent, interp: imgInterp}}
			if err := rt.Names(control); err != nil || control[0].Name != "worker-1" {
				t.Fatalf("the thread as the cases below give it: name %q, %v", control[0].Name, err)
			}
			for name, bad := range map[string]func(m image){
				"a key not an int":       func(m image) { le.PutUint64(m[imgActive+0x80-imgBase+uint64(l.KeysIndices)+8+8:], imgThread) },
				"a huge dict":            func(m image) { le.PutUint64(m[imgActive+0x80-imgBase+uint64(l.KeysNentries):], 1<<40) },
				"a name not a str":       func(m image) { le.PutUint64(m[imgAttrs+0x80-imgBase+uint64(l.KeysIndices)+8+16:], imgLong) },
				"a class not a class":    func(m image) { le.PutUint64(m[imgClass-imgBase+uint64(l.TypeFlags):], 0) },
				"an int of 4 digits":     func(m image) { le.PutUint64(m[imgLong-imgBase+uint64(max(l.LongTag, l.VarSize)):], 4<<3|4) },
				"_active in nowhere":     func(m image) { le.PutUint64(m[imgGlobals+0x80-imgBase+uint64(l.KeysIndices)+8+16:], 0xdead0000) },
				"sys.modules not a dict": func(m image) { le.PutUint64(m[imgModules-imgBase+uint64(l.ObType):], imgStrTy) },
			} {
				c := append(image(nil), m...)
				bad(c)
				ths := []Thread{{ThreadID: imgIdent, interp: imgInterp}}
				if err := imageRuntime(c, l).Names(ths); err == nil || ths[0].Name != "" {
					t.Errorf("%s: name %q, %v; want none, an error", name, ths[0].Name, err)
				}
			}
			c := append(image(nil), m...)
			copy(c[imgStrs+0x80-imgBase+uint64(l.StrASCIIData):], "threadinG")
			ths = []Thread{{ThreadID: imgIdent, interp: imgInterp}}
			if err := imageRuntime(c, l).Names(ths); err != nil || ths[0].Name != "" {
				t.Errorf("no threading module: name %q, %v; want none, no error", ths[0].Name, err)
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

// FuzzThreads (seeds in testdata/fuzz/FuzzThreads): whatever the
// process's memory holds, reading its threads and their threading names
// ends, without a panic, with bounded frames and names. An input is a
// patch of at most 256 bytes written over one release's image (which) at
// offset off (testutil.Patched): whole images as inputs, 14 KiB each,
// left the fuzzer minimising (no execution counted in 15 s).
func FuzzThreads(f *testing.F) {
	imgs := make([][]byte, len(layouts))
	for i := range layouts {
		l := &layouts[i]
		imgs[i] = buildImage(l, tableFor(l.Minor), 8, 2)
	}
	var work []byte
	f.Fuzz(func(t *testing.T, which uint8, off uint32, patch []byte) {
		if len(patch) > 256 {
			return
		}
		i := int(which) % len(layouts)
		work = testutil.Patched(work, imgs[i], off, patch)
		rt := imageRuntime(image(work), &layouts[i])
		ths, _ := rt.Threads()
		rt.Names(ths)
		for i := range ths {
			if len(ths[i].Frames) > MaxFrames {
				t.Fatalf("%d frames", len(ths[i].Frames))
			}
			if n := ths[i].Name; len(n) > MaxName || !utf8.ValidString(n) {
				t.Fatalf("name %q", n)
			}
			rt := report.Thread{Frames: []report.Frame{{Kind: "user", Function: "_PyEval_EvalFrameDefault"}}}
			Inline(&rt, &ths[i])
		}
	})
}

// imageSeeds are FuzzThreads' seeds for release layouts[i]: its image as
// built, and each structure the reader follows rewritten with itself (the
// fuzzer's mutations of these patches land where the reader looks).
func imageSeeds(i int) (offs []uint32, patches [][]byte) {
	l := &layouts[i]
	m := buildImage(l, tableFor(l.Minor), 8, 2)
	offs, patches = append(offs, 0), append(patches, []byte{})
	for _, at := range []uint64{imgRuntime, imgInterp, imgTstate, imgCFrame, imgFrame1, imgFrame2, imgCode,
		imgName, imgTable, imgModules, imgGlobals, imgActive, imgAttrs, imgThread - 0x20, imgLong, imgClass} {
		o := at - imgBase
		n := min(uint64(64), uint64(len(m))-o)
		offs, patches = append(offs, uint32(o)), append(patches, append([]byte(nil), m[o:o+n]...))
	}
	return offs, patches
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seeds in testdata/fuzz")

// seedDir is fuzz target name's seed corpus, made if missing. The seeds an
// update writes are overwritten; the others (inputs that once failed) stay.
func seedDir(t *testing.T, name string) string {
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUpdateImageSeeds rewrites testdata/fuzz/FuzzThreads (imageSeeds of
// each release) when run with -update-seeds.
func TestUpdateImageSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("rewrites the seed corpus only with -update-seeds")
	}
	dir := seedDir(t, "FuzzThreads")
	for i := range layouts {
		offs, patches := imageSeeds(i)
		for k := range offs {
			b := fmt.Sprintf("go test fuzz v1\nuint8(%d)\nuint32(%d)\n[]byte(%s)\n", i, offs[k], strconv.Quote(string(patches[k])))
			name := fmt.Sprintf("image-3.%d-%04x", layouts[i].Minor, offs[k])
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
