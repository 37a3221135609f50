//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"stackshot/internal/testutil"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/pyruntime"
	"stackshot/report"
	"stackshot/resolve"
	"stackshot/symtab"
	"stackshot/unwind"
)

// record's walks through the child are the walks made in-process: the
// same frames, stop reasons and names for every thread of another user's
// process, at a first tick (the maps sent) and a second one (the child's
// tables and names kept).
func TestWalkerSameAsInProcess(t *testing.T) {
	tg := startAsOther(t)
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, liveConfig(), tgt)
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeStop}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Images(p); err != nil {
		t.Fatal(err)
	}
	var ths []*ptrace.Thread
	for i := range p.Threads {
		ths = append(ths, &p.Threads[i])
	}
	res := resolve.NewResolver(symtab.New(symtab.Options{}), resolve.Options{Live: true, Sampler: true})
	space := res.Space(p, ptrace.MemReader{PID: p.MemPID()})
	w := c.Walker()
	for tick := 0; tick < 2; tick++ {
		ws, err := w.Walk(p, ths)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != len(ths) || len(ths) < 7 {
			t.Fatalf("%d walks for %d threads", len(ws), len(ths))
		}
		for i, th := range ths {
			fr, stop, ok := space.Unwind(th, nil)
			if ws[i].OK != ok || ws[i].Stop != stop || ws[i].Err != "" || !reflect.DeepEqual(ws[i].Frames, fr) {
				t.Errorf("tick %d thread %s: child %v %v %q %+v\n in-process %v %v %+v", tick, th.Name, ws[i].OK, ws[i].Stop, ws[i].Err, ws[i].Frames, ok, stop, fr)
				continue
			}
			var got []report.Frame
			for _, f := range ws[i].Frames {
				got = w.Name(got, f)
			}
			want := res.Frames(space, th, fr, ok, nil)
			if !reflect.DeepEqual(got, want) || len(want) < 3 || want[len(want)-1].Function == "" {
				t.Errorf("tick %d thread %s: names\n child      %+v\n in-process %+v", tick, th.Name, got, want)
			}
		}
	}
}

// FuzzWalkAnswer feeds the parent's reader of the child's walks with what
// a compromised child could answer: walks within the words sent, or an
// error, never a panic.
func FuzzWalkAnswer(f *testing.F) {
	pack := func(words ...uint64) []byte {
		var b []byte
		for _, w := range words {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
		return b
	}
	f.Add(pack(2, uint64(unwind.StopEnd), 0x401000, 0x7ffc0000, packExact, 0x401234, 0x7ffc0040, uint64(unwind.MethodCFI)), uint8(1), uint8(0))
	f.Add(pack(noRegs, 0, 1, uint64(unwind.StopMaxFrames), 0x1000, 0, 0xffff), uint8(2), uint8(1))
	f.Add(pack(^uint64(0)>>1, 0), uint8(1), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, n, named uint8) {
		up := &upMsg{Kind: kRecord}
		for len(data) >= 8 {
			up.Walks = append(up.Walks, binary.LittleEndian.Uint64(data))
			data = data[8:]
		}
		for i := range int(named % 4) {
			up.NamedPCs = append(up.NamedPCs, uint64(i))
			up.Frames = append(up.Frames, []report.Frame{{Function: "f"}})
		}
		w := &Walker{names: map[uint64][]report.Frame{}}
		if err := w.unpack(up, int(n)); err != nil {
			return
		}
		if len(w.walks) != int(n) {
			t.Fatalf("%d walks for %d threads", len(w.walks), n)
		}
		total := 0
		for _, wk := range w.walks {
			total += len(wk.Frames)
		}
		if total > len(up.Walks)/3 {
			t.Fatalf("%d frames from %d words", total, len(up.Walks))
		}
	})
}

// BenchmarkWalkTick is one warm tick of record on a process of another
// user (blocked.c's 8 threads and its 5 busy ones, stopped once): every
// thread unwound in-process (resolve, tables compiled whole), or through
// the child in one round trip (its threads' stack copies sent, their walks
// back; the names were sent at the first tick).
func BenchmarkWalkTick(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	setpriv := testutil.Need(b, "setpriv")
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "blocked.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, setpriv, "--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--", bin, "spin", "busy")
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeStop}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var ths []*ptrace.Thread
	for i := range p.Threads {
		ths = append(ths, &p.Threads[i])
	}
	opts := resolve.Options{Live: true, Sampler: true}
	b.Run("in-process", func(b *testing.B) {
		res := resolve.NewResolver(symtab.New(symtab.Options{}), opts)
		mine := *p
		resolve.CollectImages(&mine, ptrace.MemReader{PID: p.MemPID()})
		space := res.Space(&mine, ptrace.MemReader{PID: p.MemPID()})
		var buf []unwind.Frame
		for b.Loop() {
			space.Update(&mine)
			for _, th := range ths {
				buf, _, _ = space.Unwind(th, buf[:0])
			}
		}
	})
	b.Run("child", func(b *testing.B) {
		c, err := Start(Config{Resolve: opts}, tgt)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if err := c.Images(p); err != nil {
			b.Fatal(err)
		}
		w := c.Walker()
		for b.Loop() {
			if _, err := w.Walk(p, ths); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzWalkRuntimeAnswer feeds the parent's reader of the runtime frames a
// kRecord answer carries (recordruntime.go) with what a compromised child
// could send: per thread at most pyruntime.MaxFrames bounded frames, all
// of them within what was sent, or an error, never a panic.
func FuzzWalkRuntimeAnswer(f *testing.F) {
	for _, up := range runtimeAnswerSeeds() {
		f.Add(encodeValue(nil, &up), uint8(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		var up upMsg
		if decodeInto(data, &up, 1<<20) != nil {
			return
		}
		w := &Walker{}
		for i := range int(n % 8) {
			w.ths = append(w.ths, ptrace.Thread{TID: 100 + i})
			w.walks = append(w.walks, Walk{})
		}
		if err := w.unpackRuntime(&up, int(n%8)); err != nil {
			return
		}
		total := 0
		for i, wk := range w.walks {
			if wk.Python == nil {
				continue
			}
			if wk.Python.NativeID != 100+i || len(wk.Python.Frames) > pyruntime.MaxFrames {
				t.Fatalf("walk %d: thread %d, %d frames", i, wk.Python.NativeID, len(wk.Python.Frames))
			}
			for _, fr := range wk.Python.Frames {
				if len(fr.QualName) > maxRuntimeName || len(fr.File) > maxRuntimeName || fr.Line < 0 {
					t.Fatalf("walk %d: frame %+v", i, fr)
				}
			}
			total += len(wk.Python.Frames)
		}
		if total > len(up.RtFrames) {
			t.Fatalf("%d frames from %d sent", total, len(up.RtFrames))
		}
	})
}

// runtimeAnswerSeeds are kRecord answers with runtime frames for two
// threads: well formed, and counts that lie.
func runtimeAnswerSeeds() []upMsg {
	fs := []pyruntime.Frame{{Name: "hot_a", QualName: "hot_a", File: "/srv/hot.py", Line: 19},
		{Name: "run", QualName: "run", File: "/srv/hot.py", Line: 29, Entry: true}, {Name: "f\x1b[2J", QualName: "f", Line: 1}}
	return []upMsg{
		{Kind: kRecord, RtCounts: []uint64{2, 1}, RtGIL: []bool{true, false}, RtFrames: fs},
		{Kind: kRecord, RtCounts: []uint64{1 << 62, 1}, RtGIL: []bool{false, false}, RtFrames: fs},
		{Kind: kRecord, RtCounts: []uint64{0, 0}, RtGIL: []bool{false, true}},
	}
}

// TestUpdateRuntimeAnswerSeeds rewrites testdata/fuzz/FuzzWalkRuntimeAnswer
// from runtimeAnswerSeeds when run with -update-seeds.
func TestUpdateRuntimeAnswerSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("rewrites the seed corpus only with -update-seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzWalkRuntimeAnswer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, up := range runtimeAnswerSeeds() {
		b := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\nuint8(2)\n", strconv.Quote(string(encodeValue(nil, &up))))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkWalkTickPython is one warm tick of record on another user's
// busy CPython process (hot.py): its threads unwound in the child, alone
// and with their Python frames in the same round trip (the interpreter
// opened once, before), and the Python frames read in-process for
// comparison.
func BenchmarkWalkTickPython(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	setpriv := testutil.Need(b, "setpriv")
	py := testutil.Need(b, "/usr/bin/python3.11")
	tg := testutil.Start(b, setpriv, "--reuid", fmt.Sprint(otherUser), "--regid", fmt.Sprint(otherUser), "--clear-groups", "--",
		py, testutil.Testdata("python", "hot.py"))
	tgt, err := TargetOf(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	p, err := ptrace.Capture(tg.PID, ptrace.Options{Mode: ptrace.ModeStop}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var ths []*ptrace.Thread
	for i := range p.Threads {
		ths = append(ths, &p.Threads[i])
	}
	id, err := procmaps.ReadIdentity(tg.PID)
	if err != nil {
		b.Fatal(err)
	}
	cands := pyruntime.Candidates(p.Exe, p.Maps, nil)
	opts := resolve.Options{Live: true, Sampler: true}
	for _, python := range []bool{false, true} {
		b.Run(map[bool]string{false: "child", true: "child+python"}[python], func(b *testing.B) {
			c, err := Start(Config{Resolve: opts}, tgt)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if err := c.Images(p); err != nil {
				b.Fatal(err)
			}
			w := c.Walker()
			if python {
				if v, err := w.OpenRuntime(p, id, "python", cands); v == "" || err != nil {
					b.Fatalf("no interpreter opened: %q %v", v, err)
				}
			}
			for b.Loop() {
				ws, err := w.Walk(p, ths)
				if err != nil {
					b.Fatal(err)
				}
				if python && ws[0].Python == nil {
					b.Fatal("no Python frames for the main thread")
				}
			}
		})
	}
	b.Run("in-process-python", func(b *testing.B) {
		mem := ptrace.MemReader{PID: p.MemPID()}
		rt, err := pyruntime.OpenLive(p.MemPID(), cands, mem)
		if err != nil {
			b.Fatal(err)
		}
		tids := map[int]bool{}
		for _, th := range ths {
			tids[th.TID] = true
		}
		for b.Loop() {
			threads, _ := rt.Threads()
			pyruntime.ByTID(rt, threads, tids)
		}
	})
}
