package output

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"stackshot/internal/testutil"
	"stackshot/report"
)

func writePprofFile(t *testing.T, p *Profile) (string, *profile.Profile) {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePprof(&buf, p); err != nil {
		t.Fatalf("WritePprof: %v", err)
	}
	if b := buf.Bytes(); len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("output is not gzipped")
	}
	path := filepath.Join(t.TempDir(), "prof.pb.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pp, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("profile.Parse: %v", err)
	}
	if err := pp.CheckValid(); err != nil {
		t.Fatalf("CheckValid: %v", err)
	}
	return path, pp
}

func lineNames(l *profile.Location) []string {
	var s []string
	for _, ln := range l.Line {
		s = append(s, ln.Function.Name)
	}
	return s
}

// sampleStack is a sample's function names, leaf first, inlined expanded.
func sampleStack(s *profile.Sample) string {
	var names []string
	for _, l := range s.Location {
		names = append(names, lineNames(l)...)
	}
	return strings.Join(names, " <- ")
}

func TestPprofRoundTrip(t *testing.T) {
	p := fixtureProfile()
	_, pp := writePprofFile(t, p)

	if len(pp.SampleType) != 2 || pp.SampleType[0].Type != "samples" || pp.SampleType[0].Unit != "count" ||
		pp.SampleType[1].Type != "cpu" || pp.SampleType[1].Unit != "nanoseconds" {
		t.Errorf("sample types %v %v", pp.SampleType[0], pp.SampleType[1])
	}
	if pp.PeriodType == nil || pp.PeriodType.Type != "cpu" || pp.PeriodType.Unit != "nanoseconds" || pp.Period != 10101010 {
		t.Errorf("period %v %d, want cpu/nanoseconds 10101010 (1e9/99)", pp.PeriodType, pp.Period)
	}
	if pp.DurationNanos != 10e9 || pp.TimeNanos != p.Start.UnixNano() {
		t.Errorf("duration %d time %d", pp.DurationNanos, pp.TimeNanos)
	}

	// Samples, by their stacks; written by hand from the fixture (the
	// zero-count sample is absent; samples 2 and 3 stay apart: their tids differ).
	type want struct {
		count, cpu int64
		thread     string
		tid, pid   int64
	}
	wants := map[string][]want{
		"clear_page_erms <- asm_exc_page_fault <- hot_a_inner <- hot_a <- " + fxOperator + " <- main <- __libc_start_call_main": {{60, 606060606, "worker-1", 4243, 4242}},
		"hot_a_inner <- hot_a <- " + fxOperator + " <- main <- __libc_start_call_main":                                          {{40, 404040404, "worker-2", 4244, 4242}},
		"hot_b <- main <- __libc_start_call_main":                                                                               {{7, 70707070, "worker-2", 4245, 4242}, {20, 202020202, "worker-2", 4244, 4242}},
		"libfoo.so.1+0x4567 <- libfoo.so.1+0x4a10 <- weird;name with newline <- main <- __libc_start_call_main":                 {{5, 50505050, "worker-1", 4243, 4242}},
		"futex_wait_queue <- do_futex <- __futex_abstimed_wait_common <- main <- __libc_start_call_main":                        {{10, 101010101, "myserver", 4242, 4242}},
		"crunch <- main <- __libc_start_call_main":                                                                              {{15, 151515151, "batch;job", 5151, 5151}},
		"[unknown] <- crunch <- main <- __libc_start_call_main":                                                                 {{4, 40404040, "jit<&>", 5152, 5151}},
		"0xffffffff81000123 <- [unknown]":                                                                                       {{3, 30303030, "jit<&>", 5152, 5151}},
	}
	got := map[string][]want{}
	for _, s := range pp.Sample {
		w := want{s.Value[0], s.Value[1], "", 0, 0}
		if v := s.Label["thread"]; len(v) == 1 {
			w.thread = v[0]
		}
		if v := s.NumLabel["tid"]; len(v) == 1 {
			w.tid = v[0]
		}
		if v := s.NumLabel["pid"]; len(v) == 1 {
			w.pid = v[0]
		}
		k := sampleStack(s)
		got[k] = append(got[k], w)
		sort.Slice(got[k], func(i, j int) bool { return got[k][i].count < got[k][j].count })
	}
	for k, w := range wants {
		g := got[k]
		if len(g) != len(w) {
			t.Errorf("stack %q: got %v, want %v", k, g, w)
			continue
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("stack %q: got %+v, want %+v", k, g[i], w[i])
			}
		}
	}
	for k := range got {
		if _, ok := wants[k]; !ok {
			t.Errorf("unexpected stack %q", k)
		}
	}

	// The hot_a location: one address, two lines, the inlined leaf first.
	var hot *profile.Location
	for _, l := range pp.Location {
		if l.Address == fxExeBias+0x1234 {
			if hot != nil {
				t.Errorf("two locations at hot_a's PC")
			}
			hot = l
		}
	}
	if hot == nil {
		t.Fatalf("no location at hot_a's PC")
	}
	if len(hot.Line) != 2 || hot.Line[0].Function.Name != "hot_a_inner" || hot.Line[0].Line != 12 ||
		hot.Line[0].Function.Filename != "/src/myserver/hot.h" ||
		hot.Line[1].Function.Name != "hot_a" || hot.Line[1].Line != 30 || hot.Line[1].Function.Filename != "/src/myserver/hot.c" {
		t.Errorf("hot_a location lines: %+v", hot.Line)
	}
	if hot.Mapping == nil || hot.Mapping.File != fxExe {
		t.Errorf("hot_a location mapping %+v", hot.Mapping)
	}

	// Mappings, from the PCs of the fixture by hand.
	type mwant struct {
		file, id                 string
		start, limit, off        uint64
		funcs, files, lines, inl bool
	}
	mwants := []mwant{
		{fxExe, fxExeID, fxExeBias + 0x1234, fxExeBias + 0x1501, 0x1234, true, true, true, true},
		{fxBatch, fxBatchID, 0x401136, 0x401191, 0x401136, true, true, true, false},
		{fxLibc, fxLibcID, fxLibcBias1 + 0x29d90, fxLibcBias1 + 0x91118, 0x29d90, true, true, true, false},
		{fxLibc, fxLibcID, fxLibcBias2 + 0x29d90, fxLibcBias2 + 0x29d91, 0x29d90, true, true, true, false},
		{fxLibfoo, fxLibfooID, 0x7f3a1d004567, 0x7f3a1d004a11, 0x4567, true, false, false, false},
		{"[kernel]", "", 0xffffffff81000123, 0xffffffff81c0d4e1, 0, true, false, false, false},
		{"[unknown]", "", 0x7f0012345678, 0x7f0012345679, 0, true, false, false, false},
	}
	if len(pp.Mapping) != len(mwants) {
		t.Errorf("%d mappings, want %d", len(pp.Mapping), len(mwants))
	}
	for _, mw := range mwants {
		found := false
		for _, m := range pp.Mapping {
			if m.File != mw.file || m.Start != mw.start {
				continue
			}
			found = true
			g := mwant{m.File, m.BuildID, m.Start, m.Limit, m.Offset, m.HasFunctions, m.HasFilenames, m.HasLineNumbers, m.HasInlineFrames}
			if g != mw {
				t.Errorf("mapping\n got %+v\nwant %+v", g, mw)
			}
		}
		if !found {
			t.Errorf("no mapping %s at %#x", mw.file, mw.start)
		}
	}
	if f := pp.Mapping[0].File; f != fxExe && f != fxBatch {
		t.Errorf("first mapping is %s, want a main executable", f)
	}
	for _, l := range pp.Location {
		if l.Mapping == nil {
			t.Errorf("location %#x without mapping", l.Address)
		} else if l.Address != 0 && (l.Address < l.Mapping.Start || l.Address >= l.Mapping.Limit) {
			t.Errorf("location %#x outside its mapping %s [%#x,%#x)", l.Address, l.Mapping.File, l.Mapping.Start, l.Mapping.Limit)
		}
	}

	// Functions: two mains (different files), names kept verbatim but for
	// the newline.
	var names []string
	for _, f := range pp.Function {
		names = append(names, f.Name+"|"+f.Filename)
		if f.SystemName != f.Name {
			t.Errorf("function %q system name %q", f.Name, f.SystemName)
		}
	}
	sort.Strings(names)
	wantNames := []string{
		"0xffffffff81000123|", "[unknown]|",
		"__futex_abstimed_wait_common|./nptl/futex-internal.c",
		"__libc_start_call_main|../sysdeps/nptl/libc_start_call_main.h",
		"asm_exc_page_fault|", "clear_page_erms|", "crunch|/src/batch/crunch.c",
		"do_futex|", "futex_wait_queue|",
		"hot_a_inner|/src/myserver/hot.h", "hot_a|/src/myserver/hot.c", "hot_b|/src/myserver/hot.c",
		"libfoo.so.1+0x4567|", "libfoo.so.1+0x4a10|",
		"main|/src/batch/crunch.c", "main|/src/myserver/main.c",
		fxOperator + "|/src/myserver/fmt.cc",
		"weird;name with newline|",
	}
	sort.Strings(wantNames)
	if strings.Join(names, "\n") != strings.Join(wantNames, "\n") {
		t.Errorf("functions:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(wantNames, "\n"))
	}
	if len(pp.Comments) == 0 || !strings.Contains(pp.Comments[0], "99 Hz requested") {
		t.Errorf("comments %q", pp.Comments)
	}
}

func TestPprofNoFrequency(t *testing.T) {
	p := fixtureProfile()
	p.FreqHz = 0
	if err := WritePprof(&bytes.Buffer{}, p); err == nil {
		t.Errorf("no error without a frequency")
	}
}

// pprofTop runs `go tool pprof -top` on path and returns flat and cum
// sample counts by function name (" (inline)" removed).
func pprofTop(t *testing.T, path string) (flat, cum map[string]int64, out string) {
	t.Helper()
	goBin := testutil.Need(t, "go")
	cmd := exec.Command(goBin, "tool", "pprof", "-top", "-sample_index=samples", "-nodecount=1000", path)
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+tmp, "PPROF_BINARY_PATH="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, stderr.String())
	}
	// Rows: flat flat% sum% cum cum% name...
	row := regexp.MustCompile(`^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+)$`)
	flat, cum = map[string]int64{}, map[string]int64{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := strings.TrimSuffix(m[3], " (inline)")
		f, _ := strconv.ParseInt(m[1], 10, 64)
		c, _ := strconv.ParseInt(m[2], 10, 64)
		flat[name] += f
		cum[name] = max(cum[name], c)
	}
	return flat, cum, stdout.String() + stderr.String()
}

func TestPprofTool(t *testing.T) {
	path, _ := writePprofFile(t, fixtureProfile())
	flat, cum, out := pprofTop(t, path)
	// Leaves of the fixture's stacks, by hand. pprof shows C++ names
	// without their parameters.
	wantFlat := map[string]int64{
		"clear_page_erms": 60, "hot_a_inner": 40, "hot_b": 27, "futex_wait_queue": 10,
		"crunch": 15, "[unknown]": 4, "0xffffffff81000123": 3, "libfoo.so.1+0x4567": 5,
		"hot_a": 0, "operator<<": 0, "__libc_start_call_main": 0, "weird;name with newline": 0,
	}
	for name, w := range wantFlat {
		g, ok := flat[name]
		if !ok {
			t.Errorf("pprof -top does not list %q\n%s", name, out)
		} else if g != w {
			t.Errorf("pprof -top flat %q = %d, want %d\n%s", name, g, w, out)
		}
	}
	wantCum := map[string]int64{"hot_a": 100, "hot_a_inner": 100, "__libc_start_call_main": 161, "main": 161,
		"do_futex": 10, "crunch": 19, "[unknown]": 7, "libfoo.so.1+0x4a10": 5}
	for name, w := range wantCum {
		if g := cum[name]; g != w {
			t.Errorf("pprof -top cum %q = %d, want %d\n%s", name, g, w, out)
		}
	}
	// Our names stand: pprof must not try to symbolize on its own.
	if strings.Contains(out, "symbolization") {
		t.Errorf("pprof tried to symbolize:\n%s", out)
	}
}

// A real binary, built now, its frames named from nm as our symbolizer
// would: go tool pprof lists the functions, and each location's mapping
// leads back to the right function in the file, as addr2line tells from
// Address - Start + Offset (the mapping arithmetic pprof's own symbolizer
// uses; in gcc's PIE layout the text segment's addresses equal its file
// offsets).
func TestPprofRealBinary(t *testing.T) {
	gcc := testutil.Need(t, "gcc")
	nm := testutil.Need(t, "nm")
	readelf := testutil.Need(t, "readelf")
	addr2line := testutil.Need(t, "addr2line")
	dir := t.TempDir()
	bin := filepath.Join(dir, "profile_target")
	build := exec.Command(gcc, "-O1", "-g", "-fPIE", "-pie", "-Wl,--build-id=sha1", "-o", bin, filepath.Join("testdata", "profile_target.c"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", build.Args, err, out)
	}
	out, err := exec.Command(nm, bin).Output()
	if err != nil {
		t.Fatalf("nm: %v", err)
	}
	syms := map[string]uint64{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[2] == "hot_a" || f[2] == "hot_b" || f[2] == "main") {
			syms[f[2]], _ = strconv.ParseUint(f[0], 16, 64)
		}
	}
	if len(syms) != 3 {
		t.Fatalf("nm found %v", syms)
	}
	out, err = exec.Command(readelf, "-n", bin).Output()
	if err != nil {
		t.Fatalf("readelf: %v", err)
	}
	m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no build id in readelf -n output")
	}
	buildID := string(m[1])
	const bias = 0x555555554000
	fr := func(sym string, delta uint64) report.Frame {
		off := syms[sym] + delta
		return report.Frame{PC: bias + off, Kind: "user", Function: sym, Offset: delta, HasOffset: true,
			Module: bin, HasModule: true, ModuleOffset: off, BuildID: buildID, Method: "cfi"}
	}
	p := &Profile{FreqHz: 99, Processes: []ProfileProcess{{PID: 77, Comm: "profile_target", Exe: bin}},
		Samples: []Sample{
			{PID: 77, TID: 77, Thread: "profile_target", Count: 30, Frames: []report.Frame{fr("hot_a", 4), fr("main", 8)}},
			{PID: 77, TID: 77, Thread: "profile_target", Count: 10, Frames: []report.Frame{fr("hot_b", 4), fr("main", 12)}},
		}}
	path, pp := writePprofFile(t, p)
	if len(pp.Mapping) != 1 || pp.Mapping[0].BuildID != buildID || pp.Mapping[0].File != bin {
		t.Fatalf("mappings %v: want one for %s, build id %s", pp.Mapping, bin, buildID)
	}
	mp := pp.Mapping[0]
	for _, l := range pp.Location {
		fileAddr := l.Address - mp.Start + mp.Offset
		out, err := exec.Command(addr2line, "-f", "-e", bin, "0x"+strconv.FormatUint(fileAddr, 16)).Output()
		if err != nil {
			t.Fatalf("addr2line: %v", err)
		}
		if fn := strings.SplitN(string(out), "\n", 2)[0]; fn != l.Line[0].Function.Name {
			t.Errorf("location %#x: mapping gives %#x, which addr2line names %q, want %q", l.Address, fileAddr, fn, l.Line[0].Function.Name)
		}
	}
	flat, cum, outText := pprofTop(t, path)
	if flat["hot_a"] != 30 || flat["hot_b"] != 10 || flat["main"] != 0 || cum["main"] != 40 {
		t.Errorf("pprof -top: flat %v cum %v\n%s", flat, cum, outText)
	}
}

// The pprof profile says how running threads were sampled, and why not
// with perf events.
func TestPprofSamplerComment(t *testing.T) {
	for _, c := range []struct {
		sampler, why, want string
	}{
		{"perf", "", "running threads sampled with perf events, no stop: 40 samples, 12 of them a runnable thread's latest"},
		{"ptrace", "perf events refused: perf_event_open: permission denied", "sampler: perf events refused: perf_event_open: permission denied"},
	} {
		p := fixtureProfile()
		p.Stats.Sampler, p.Stats.SamplerWhy, p.Stats.Perf, p.Stats.PerfHeld = c.sampler, c.why, 40, 12
		_, pp := writePprofFile(t, p)
		if !slices.Contains(pp.Comments, c.want) {
			t.Errorf("%s: comments %q lack %q", c.sampler, pp.Comments, c.want)
		}
	}
}
