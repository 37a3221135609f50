//go:build linux

package resolve

import (
	"reflect"
	"slices"
	"testing"

	"stackshot/internal/diskcache"
	"stackshot/internal/testutil"
	"stackshot/ptrace"
	"stackshot/report"
	"stackshot/symtab"
	"stackshot/unwind"
)

// A live capture's resolution reuses the walks its no-stop check made
// (one walk per thread instead of two) and names exactly what a resolver
// that never saw the check names; a walk is reused only for the capture
// and stack copy it was made from, and is dropped once resolved.
func TestCheckedWalkReused(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("realworld", "deep.c")}, "-O0", "-g")
	tg := testutil.Start(t, bin, "300")
	r := NewResolver(symtab.New(symtab.Options{}), Options{Live: true})
	p, err := r.CaptureLive(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Threads) != 1 || p.Threads[0].Method != ptrace.MethodNoStop {
		t.Fatalf("want one thread read without a stop, got %+v", p.Threads)
	}
	th := &p.Threads[0]
	mem := ptrace.MemReader{PID: p.MemPID()}
	s := r.Space(p, mem)
	// Another copy of the same stack is another capture: not reused.
	other := *th
	other.Stack = slices.Clone(th.Stack)
	if _, _, ok := r.checked.take(s, &other, nil); ok {
		t.Error("a walk was reused for another stack copy")
	}
	kept, stop, ok := r.checked.take(s, th, nil)
	if !ok || len(kept) < 302 {
		t.Fatalf("the check kept no walk of 302 frames or more (ok %v, %d frames, %v)", ok, len(kept), stop)
	}
	if r.checked.p != nil {
		t.Error("the capture was kept after its one walk was taken")
	}
	fresh := NewResolver(symtab.New(symtab.Options{}), Options{Live: true})
	if again, stop2, _ := fresh.Space(p, mem).Unwind(th, nil); !reflect.DeepEqual(kept, again) || stop != stop2 {
		t.Fatalf("kept walk (%v):\n%v\nwalked again (%v):\n%v", stop, kept, stop2, again)
	}
	r.checked.keep(s, th, kept, stop)
	got := r.Process(p, mem)
	if r.checked.p != nil || len(r.checked.walks) != 0 {
		t.Error("the walks were kept after the capture was resolved")
	}
	want := fresh.Process(p, mem)
	if !reflect.DeepEqual(got.Threads, want.Threads) {
		t.Fatalf("resolved through the check's walk:\n%+v\nwithout it:\n%+v", got.Threads, want.Threads)
	}
	var recs int
	for _, f := range got.Threads[0].Frames {
		if f.Function == "rec" {
			recs++
		}
	}
	if recs != 301 || got.Threads[0].Stop != unwind.StopEnd.String() {
		t.Fatalf("%d rec frames (want 301), stop %q: %+v", recs, got.Threads[0].Stop, got.Threads[0].Frames)
	}
}

// Names kept per PC (userFrame's memo) are what naming each frame anew
// gives, SP included; the 300 frames of the recursion's one return
// address are named once.
func TestNamedPerPC(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("realworld", "deep.c")}, "-O0", "-g")
	tg := testutil.Start(t, bin, "300")
	r := NewResolver(symtab.New(symtab.Options{}), Options{Live: true})
	p, err := r.CaptureLive(tg.PID, ptrace.Options{Mode: ptrace.ModeNoStop})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Space(p, ptrace.MemReader{PID: p.MemPID()})
	fr, _, ok := s.Unwind(&p.Threads[0], nil)
	if !ok || len(fr) < 302 {
		t.Fatalf("%d frames", len(fr))
	}
	got := r.Frames(s, &p.Threads[0], fr, true, nil)
	var want []report.Frame
	for _, f := range fr {
		want, _ = r.nameFrame(s, want, f)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("named through the memo:\n%+v\nanew:\n%+v", got, want)
	}
	if len(s.named) > 10 {
		t.Errorf("%d PCs kept for a stack of %d frames with a handful of distinct PCs", len(s.named), len(fr))
	}
	if got[150].Function != "rec" || got[150].SP == got[151].SP {
		t.Errorf("frames 150, 151: %+v %+v", got[150], got[151])
	}
}

// BenchmarkResolveDeep unwinds and names a 1,000-frame recursion read
// without a stop (testdata/realworld/deep.c), warm (modules and CFI
// loaded): "unwind" is Space.Unwind alone, "frames" the naming of its
// frames (Resolver.Frames), "process" both through Process; the walk the
// capture's check made is not reused.
func BenchmarkResolveDeep(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("realworld", "deep.c")}, "-O0", "-g")
	tg := testutil.Start(b, bin, "1000")
	r := NewResolver(symtab.New(symtab.Options{}), Options{Live: true})
	p, err := r.CaptureLive(tg.PID, ptrace.Options{Mode: ptrace.ModeNoStop})
	if err != nil {
		b.Fatal(err)
	}
	mem := ptrace.MemReader{PID: p.MemPID()}
	r.checked.reset()
	rp := r.Process(p, mem)
	if n := len(rp.Threads[0].Frames); n < 1000 {
		b.Fatalf("%d frames", n)
	}
	th := &p.Threads[0]
	s := r.Space(p, mem)
	fr, _, _ := s.Unwind(th, nil)
	perFrame := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(fr)), "ns/frame")
	}
	b.Run("unwind", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]unwind.Frame, 0, len(fr))
		for b.Loop() {
			buf, _, _ = s.Unwind(th, buf[:0])
		}
		perFrame(b)
	})
	b.Run("frames", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Frames(s, th, fr, true, nil)
		}
		perFrame(b)
	})
	b.Run("process", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Process(p, mem)
		}
		perFrame(b)
	})
}

// BenchmarkDumpWarm is a one-off dump's resolving side, in-process: per
// iteration a fresh symbolizer over a filled disk cache and a fresh
// resolver capture a 2-thread process (testdata/targets/many.c) without a
// stop, check and name its threads (what `stackshot PID` does after its
// start, rendering aside).
func BenchmarkDumpWarm(b *testing.B) {
	bin := testutil.Build(b, "gcc", []string{testutil.Testdata("targets", "many.c")}, "-O2", "-g", "-pthread")
	tg := testutil.Start(b, bin, "1")
	cache, err := diskcache.Open(b.TempDir(), 64<<20)
	if err != nil {
		b.Fatal(err)
	}
	dump := func() *report.Process {
		r := NewResolver(symtab.New(symtab.Options{Cache: cache, NamesOnly: true}), Options{Live: true})
		p, err := r.CaptureLive(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto})
		if err != nil {
			b.Fatal(err)
		}
		return r.Process(p, ptrace.MemReader{PID: p.MemPID()})
	}
	if rp := dump(); len(rp.Threads) != 2 {
		b.Fatalf("%d threads", len(rp.Threads))
	}
	b.ReportAllocs()
	for b.Loop() {
		dump()
	}
}

// askLog is a symtab.Cache that holds nothing and logs the kinds of the
// entries asked for.
type askLog struct{ kinds []string }

func (a *askLog) Get(k diskcache.Key, _ int64) ([]byte, bool) {
	a.kinds = append(a.kinds, k.Kind)
	return nil, false
}

func (a *askLog) Put(diskcache.Key, []byte) error { return nil }

// WarmChecked readies the modules of the check's walks before the
// resolve: the symbol tables of the executable and libc are loaded by it
// (asked of the cache then), not by the resolve that follows, which names
// what a resolver that was never warmed names. A second call looks at
// nothing again.
func TestWarmChecked(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("realworld", "deep.c")}, "-O0", "-g")
	tg := testutil.Start(t, bin, "30")
	asked := &askLog{}
	r := NewResolver(symtab.New(symtab.Options{Cache: asked, NamesOnly: true}), Options{Live: true})
	p, err := r.CaptureLive(tg.PID, ptrace.Options{Mode: ptrace.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Threads) != 1 || p.Threads[0].Method != ptrace.MethodNoStop {
		t.Fatalf("want one thread read without a stop, got %+v", p.Threads)
	}
	symbols := func() int {
		return len(slices.DeleteFunc(slices.Clone(asked.kinds), func(k string) bool { return k != "symbols" }))
	}
	if n := symbols(); n != 0 {
		t.Fatalf("the check asked for %d symbol tables", n)
	}
	mem := ptrace.MemReader{PID: p.MemPID()}
	s := r.Space(p, mem)
	r.WarmChecked(s)
	if n := symbols(); n != 2 {
		t.Fatalf("warming asked for %d symbol tables (%v), want the executable's and libc's", n, asked.kinds)
	}
	before := len(asked.kinds)
	r.WarmChecked(s)
	if len(asked.kinds) != before {
		t.Errorf("a second warming asked for %v", asked.kinds[before:])
	}
	got := r.Process(p, mem)
	if n := symbols(); n != 2 {
		t.Errorf("the resolve asked for %d symbol tables after the warming, want none more", n-2)
	}
	want := NewResolver(symtab.New(symtab.Options{NamesOnly: true}), Options{Live: true}).Process(p, mem)
	if !reflect.DeepEqual(got.Threads, want.Threads) {
		t.Fatalf("resolved after warming:\n%+v\nwithout:\n%+v", got.Threads, want.Threads)
	}
}
