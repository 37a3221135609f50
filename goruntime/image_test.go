package goruntime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// imageMem is a fake address space: data at base.
type imageMem struct {
	base uint64
	data []byte
}

func (m imageMem) ReadAt(p []byte, off int64) (int, error) {
	a := uint64(off)
	if a < m.base || a-m.base >= uint64(len(m.data)) {
		return 0, fmt.Errorf("unmapped %#x", a)
	}
	n := copy(p, m.data[a-m.base:])
	if n < len(p) {
		return n, fmt.Errorf("short read at %#x", a)
	}
	return n, nil
}

const (
	imgBase    = 0x100000
	imgText    = 0x400000
	imgModdata = imgBase
	imgAllgs   = imgBase + 0x900
	imgAllglen = imgBase + 0x918
)

// testImage builds, for the go1.26 layout, the smallest address space
// with a runtime the reader accepts: a moduledata, a pclntab with
// runtime.goexit and main.f (frame size 16), and one goroutine waiting in
// main.f called from runtime.goexit.
func testImage(t testing.TB) ([]byte, *Layout) {
	l, ok := KnownLayout("go1.26.8")
	if !ok {
		t.Fatal("no go1.26 layout")
	}
	img := make([]byte, 0x2000)
	put := func(at uint64, v uint64) { binary.LittleEndian.PutUint64(img[at-imgBase:], v) }
	put32 := func(at uint64, v uint32) { binary.LittleEndian.PutUint32(img[at-imgBase:], v) }
	md := uint64(imgModdata)
	hdr, ftab, tab, names, pctab := uint64(imgBase+0x400), uint64(imgBase+0x500), uint64(imgBase+0x600), uint64(imgBase+0x700), uint64(imgBase+0x780)
	copy(img[hdr-imgBase:], []byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8})
	put(md+uint64(l.MDPcHeader), hdr)
	put(md+uint64(l.MDFuncnametab), names)
	put(md+uint64(l.MDFuncnametab)+8, 0x80)
	put(md+uint64(l.MDPctab), pctab)
	put(md+uint64(l.MDPctab)+8, 0x80)
	put(md+uint64(l.MDPclntable), tab)
	put(md+uint64(l.MDPclntable)+8, 0x100)
	put(md+uint64(l.MDFtab), ftab)
	put(md+uint64(l.MDFtab)+8, 3)
	put(md+uint64(l.MDMinPC), imgText)
	put(md+uint64(l.MDMaxPC), imgText+0x100)
	put(md+uint64(l.MDText), imgText)
	put(md+uint64(l.MDBss), imgBase+0x900)
	put(md+uint64(l.MDEbss), imgBase+0xa10)
	// ftab: goexit [0, 0x80), main.f [0x80, 0x100).
	put32(ftab, 0)
	put32(ftab+4, 0)
	put32(ftab+8, 0x80)
	put32(ftab+12, 48)
	put32(ftab+16, 0x100)
	// _func: goexit (no pcsp table), main.f (pcsp at 1).
	put32(tab+48+uint64(l.FuncEntryOff), 0x80)
	put32(tab+48+uint64(l.FuncNameOff), 15)
	put32(tab+48+uint64(l.FuncPcsp), 1)
	copy(img[names-imgBase:], "runtime.goexit\x00main.f\x00")
	// pcsp of main.f: 16 over [entry, entry+0x80), then the end.
	copy(img[pctab+1-imgBase:], []byte{34, 0x80, 0x01, 0})
	// allgs = [g], allglen = 1; allgptr.
	g := uint64(imgBase + 0xb00)
	put(imgAllgs, imgBase+0xa00)
	put(imgAllgs+8, 1)
	put(imgAllgs+16, 1)
	put(imgAllglen, 1)
	put(imgBase+0xa08, imgBase+0xa00)
	put(imgBase+0xa00, g)
	put32(g+uint64(l.GAtomicStatus), 4)
	put(g+uint64(l.GGoid), 1)
	for i, r := range l.WaitReasons {
		if r == "chan receive" {
			img[g+uint64(l.GWaitReason)-imgBase] = byte(i)
		}
	}
	put(g+uint64(l.GStackLo), imgBase+0x1000)
	put(g+uint64(l.GStackHi), imgBase+0x2000)
	put(g+uint64(l.GSchedSP), imgBase+0x1f00)
	put(g+uint64(l.GSchedPC), imgText+0x90)
	put(g+uint64(l.GGoPC), imgText+0x85)
	put(g+uint64(l.GStartPC), imgText+0x80)
	put(imgBase+0x1f10, imgText+0x10) // main.f returns into goexit
	return img, l
}

func imageRuntime(img []byte, l *Layout, allgs []uint64, allglen uint64) (*Runtime, error) {
	mem := imageMem{base: imgBase, data: img}
	rt := &Runtime{Version: "go1.26.8", Layout: l, mem: mem, allgs: allgs, allglen: allglen}
	var err error
	rt.pcln, err = newPcln(mem, l, imgModdata)
	return rt, err
}

// TestImage reads the one goroutine of a hand-built runtime image, by its
// symbols and by the scan for allgs.
func TestImage(t *testing.T) {
	img, l := testImage(t)
	rt, err := imageRuntime(img, l, []uint64{imgAllgs}, imgAllglen)
	if err != nil {
		t.Fatal(err)
	}
	cands, err := rt.findAllgs(imgModdata)
	if err != nil || len(cands) != 1 || cands[0] != imgAllgs {
		t.Fatalf("allgs scan: %#x %v", cands, err)
	}
	snap, err := rt.Goroutines()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Goroutines) != 1 || snap.Skipped != 0 {
		t.Fatalf("%d goroutines, %d skipped %v", len(snap.Goroutines), snap.Skipped, snap.SkipReasons)
	}
	g := snap.Goroutines[0]
	if g.ID != 1 || g.Status != "waiting" || g.WaitReason != "chan receive" ||
		fmt.Sprint(g.Funcs) != "[main.f runtime.goexit]" || fmt.Sprintf("%#x", g.PCs) != "[0x400090 0x400010]" {
		t.Errorf("goroutine %+v", g)
	}
	// A return address outside Go code: the goroutine is torn, not shown.
	binary.LittleEndian.PutUint64(img[0x1f10:], 0x500000)
	snap, err = rt.Goroutines()
	if err != nil || len(snap.Goroutines) != 0 || snap.Skipped != 1 {
		t.Errorf("bad return address: %d goroutines, %d skipped, %v", len(snap.Goroutines), snap.Skipped, err)
	}
}

// FuzzGoroutines: whatever the program's memory holds, reading its
// goroutines ends, without a panic, with bounded work. An input is a patch
// of at most 256 bytes written over the hand-built runtime image
// (testImage) at offset off: the fuzzer mutates the runtime's structures
// (moduledata, pclntab, allgs, a g, its stack) where they lie, and an
// input stays small enough that a new one is minimised in moments (the
// whole 8 KiB image as input took the fuzzer's minutes of minimising per
// new input: 63 counted executions in 90 s).
func FuzzGoroutines(f *testing.F) {
	img, l := testImage(f)
	f.Add(uint16(0), []byte{})
	for _, at := range []uint64{imgModdata, imgBase + 0x400, imgBase + 0x500, imgBase + 0x600, imgBase + 0x780, imgAllgs, imgBase + 0xa00, imgBase + 0xb00, imgBase + 0x1f00} {
		f.Add(uint16(at-imgBase), slices.Clone(img[at-imgBase:][:64]))
	}
	work := make([]byte, len(img))
	f.Fuzz(func(t *testing.T, off uint16, patch []byte) {
		if len(patch) > 256 {
			return
		}
		copy(work, img)
		copy(work[int(off)%len(work):], patch)
		rt, err := imageRuntime(work, l, []uint64{imgAllgs}, imgAllglen)
		if err != nil {
			return
		}
		rt.findAllgs(imgModdata)
		snap, err := rt.Goroutines()
		if err != nil {
			return
		}
		for _, g := range snap.Goroutines {
			if len(g.PCs) != len(g.Funcs) || len(g.PCs) > maxFrames {
				t.Fatalf("goroutine %d: %d pcs, %d funcs", g.ID, len(g.PCs), len(g.Funcs))
			}
		}
	})
}

// TestImageDeadline: a read past its deadline ends with ErrStopped.
func TestImageDeadline(t *testing.T) {
	img, l := testImage(t)
	rt, err := imageRuntime(img, l, []uint64{imgAllgs}, imgAllglen)
	if err != nil {
		t.Fatal(err)
	}
	rt.Deadline = time.Now().Add(-time.Second)
	if _, err := rt.Goroutines(); !errors.Is(err, ErrStopped) {
		t.Errorf("err %v, want ErrStopped", err)
	}
	cancel := make(chan struct{})
	close(cancel)
	rt.Deadline, rt.Cancel = time.Time{}, cancel
	if _, err := rt.Goroutines(); !errors.Is(err, ErrStopped) {
		t.Errorf("cancelled: err %v, want ErrStopped", err)
	}
}
