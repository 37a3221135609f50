package unwind

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// readelfRow is one row of `readelf --debug-dump=frames-interp`.
type readelfRow struct {
	addr  uint64
	cells map[string]string // column name ("CFA", "rbx", ..., "ra") -> cell
}

type readelfFDE struct {
	off        string
	cie        string
	begin, end uint64
	rows       []readelfRow
}

// parseFramesInterp parses readelf's frames-interp dump of the .eh_frame
// section (or of .debug_frame when section is ".debug_frame").
func parseFramesInterp(t *testing.T, out []byte, section string) (fdes []readelfFDE, cies map[string][]readelfRow) {
	t.Helper()
	cies = make(map[string][]readelfRow)
	cieRows := make(map[string]*[]readelfRow)
	defer func() {
		for k, v := range cieRows {
			cies[k] = *v
		}
	}()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	in := false
	var cols []string
	var cur *[]readelfRow
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Contents of the ") {
			in = strings.HasPrefix(line, "Contents of the "+section+" section")
			cur = nil
			continue
		}
		if !in {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			cur = nil
		case len(f) >= 4 && f[3] == "CIE":
			rows := new([]readelfRow)
			cieRows[f[0]] = rows
			cur = rows
		case len(f) >= 6 && f[3] == "FDE":
			fd := readelfFDE{off: f[0], cie: strings.TrimPrefix(f[4], "cie=")}
			pc := strings.TrimPrefix(f[5], "pc=")
			lo, hi, ok := strings.Cut(pc, "..")
			if !ok {
				t.Fatalf("bad fde line %q", line)
			}
			fd.begin, _ = strconv.ParseUint(lo, 16, 64)
			fd.end, _ = strconv.ParseUint(hi, 16, 64)
			fdes = append(fdes, fd)
			cur = &fdes[len(fdes)-1].rows
		case f[0] == "LOC":
			cols = f
		case cur != nil && len(f) == len(cols):
			a, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil {
				continue
			}
			r := readelfRow{addr: a, cells: map[string]string{}}
			for i := 1; i < len(f); i++ {
				r.cells[cols[i]] = f[i]
			}
			// A later row at the same address replaces the earlier one.
			if n := len(*cur); n > 0 && (*cur)[n-1].addr == a {
				(*cur)[n-1] = r
			} else {
				*cur = append(*cur, r)
			}
		}
	}
	return fdes, cies
}

var checkedCols = []struct {
	name string
	reg  int
}{{"rbx", RegRBX}, {"rbp", RegRBP}, {"r12", RegR12}, {"r13", RegR13}, {"r14", RegR14}, {"r15", RegR15}, {"ra", RegRIP}}

// compareWithReadelf checks every readelf row of path's .eh_frame against
// the table LoadTable builds from path.
func compareWithReadelf(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := LoadTable(f, nil)
	if err != nil {
		t.Fatalf("LoadTable(%s): %v", path, err)
	}
	compareTable(t, tab, path, ".eh_frame")
}

// compareTable checks every readelf row of section in path against tab.
func compareTable(t *testing.T, tab *Table, path, section string) {
	readelf := needTool(t, "readelf")
	// readelf exits 1 after harmless complaints (e.g. libc's missing
	// interpreter); the dump on stdout is still complete.
	out, err := exec.Command(readelf, "--debug-dump=frames-interp", path).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("readelf: %v", err)
	}
	fdes, cies := parseFramesInterp(t, out, section)
	if len(fdes) == 0 {
		t.Fatalf("readelf printed no FDEs in %s of %s", section, path)
	}
	sort.SliceStable(fdes, func(i, j int) bool { return fdes[i].begin < fdes[j].begin })
	var covered uint64
	rows, mismatches := 0, 0
	for i, fd := range fdes {
		if fd.begin == fd.end {
			continue
		}
		if i > 0 && fd.begin < covered {
			continue // overlapping FDE: ours keeps the first, like the unwinder
		}
		covered = fd.end
		want := fd.rows
		if len(want) == 0 {
			// No instructions: the CIE's initial row holds for the whole range.
			crow := cies[fd.cie]
			if len(crow) == 0 {
				t.Errorf("fde %s: no rows and no CIE rows", fd.off)
				continue
			}
			want = []readelfRow{{addr: fd.begin, cells: crow[0].cells}}
		}
		for _, w := range want {
			if w.addr >= fd.end {
				continue
			}
			rows++
			got, ok := tab.Find(w.addr)
			if !ok {
				mismatches++
				if mismatches < 20 {
					t.Errorf("fde %s: no row at %#x", fd.off, w.addr)
				}
				continue
			}
			bad := RuleString(got.CFA) != w.cells["CFA"]
			for _, c := range checkedCols {
				wc, ok := w.cells[c.name]
				if !ok {
					wc = "u"
				}
				if RuleString(got.Regs[c.reg]) != wc {
					bad = true
				}
			}
			if bad {
				mismatches++
				if mismatches < 20 {
					t.Errorf("fde %s at %#x: got %s, readelf %v", fd.off, w.addr, got, w.cells)
				}
			}
		}
	}
	// The first address past every FDE must have no row unless another FDE starts there.
	for _, fd := range fdes {
		if fd.begin == fd.end {
			continue
		}
		next := sort.Search(len(fdes), func(i int) bool { return fdes[i].begin >= fd.end })
		if next < len(fdes) && fdes[next].begin == fd.end {
			continue
		}
		if _, ok := tab.Find(fd.end); ok {
			inside := false
			for _, g := range fdes {
				if g.begin <= fd.end && fd.end < g.end {
					inside = true
					break
				}
			}
			if !inside {
				t.Errorf("row found at %#x past the end of fde %s", fd.end, fd.off)
			}
		}
	}
	t.Logf("%s: %d FDEs, %d readelf rows compared, %d table rows, %d mismatches", path, len(fdes), rows, tab.Len(), mismatches)
	if rows == 0 {
		t.Fatal("nothing compared")
	}
}

func TestReadelfAgreementLibc(t *testing.T) {
	needLinuxAmd64(t)
	_, err := os.Stat(libcPath)
	skipUnless(t, err == nil, libcPath+" is missing")
	compareWithReadelf(t, libcPath)
}

func TestReadelfAgreementO2(t *testing.T) {
	for _, v := range []struct {
		name  string
		flags []string
	}{
		{"O2", cFlagsO2},
		{"static", append([]string{"-static"}, cFlagsO2...)},
	} {
		t.Run(v.name, func(t *testing.T) {
			compareWithReadelf(t, buildTarget(t, "gcc", "target.c", v.flags...))
		})
	}
	// C++: "zPLR" CIEs (personality, LSDA) and landing pads.
	t.Run("cxx", func(t *testing.T) {
		compareWithReadelf(t, buildTarget(t, "g++", "throw.cc", "-O2", "-fomit-frame-pointer", "-g"))
	})
}

// selfVDSO returns this process's [vdso] image, or nil.
func selfVDSO() []byte {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if !strings.HasSuffix(line, "[vdso]") {
			continue
		}
		lo, hi, _ := strings.Cut(strings.Fields(line)[0], "-")
		a, _ := strconv.ParseUint(lo, 16, 64)
		b, _ := strconv.ParseUint(hi, 16, 64)
		mem, err := os.Open("/proc/self/mem")
		if err != nil {
			return nil
		}
		defer mem.Close()
		img := make([]byte, b-a)
		if _, err := mem.ReadAt(img, int64(a)); err != nil {
			return nil
		}
		return img
	}
	return nil
}

// The vdso's table, built from the in-memory image, agrees with readelf
// run on the same image written to a file.
func TestReadelfAgreementVDSO(t *testing.T) {
	needLinuxAmd64(t)
	img := selfVDSO()
	skipUnless(t, img != nil, "no [vdso] mapping readable in this process")
	p := filepath.Join(t.TempDir(), "vdso.so")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTable(bytes.NewReader(img), nil); err != nil {
		t.Fatalf("LoadTable(vdso image): %v", err)
	}
	compareWithReadelf(t, p)
}

// A file without section headers: .eh_frame is found through
// PT_GNU_EH_FRAME and .eh_frame_hdr, and yields the same rows.
func TestLoadTableNoSectionHeaders(t *testing.T) {
	bin := buildTarget(t, "gcc", "target.c", cFlagsO2...)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	full, err := LoadTable(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Zero e_shoff, e_shnum and e_shstrndx.
	stripped := append([]byte(nil), data...)
	clear(stripped[0x28:0x30])
	clear(stripped[0x3c:0x40])
	tab, err := LoadTable(bytes.NewReader(stripped), nil)
	if err != nil {
		t.Fatalf("LoadTable without section headers: %v", err)
	}
	var a, b []string
	full.Rows(func(r Row) bool { a = append(a, r.String()); return true })
	tab.Rows(func(r Row) bool { b = append(b, r.String()); return true })
	if strings.Join(a, "\n") != strings.Join(b, "\n") || len(a) == 0 {
		t.Errorf("rows differ: %d with sections, %d without", len(a), len(b))
	}
}

// .debug_frame from a separate debug file (objcopy --only-keep-debug) of a
// binary built without unwind tables.
func TestReadelfAgreementDebugFile(t *testing.T) {
	objcopy := needTool(t, "objcopy")
	bin := buildTarget(t, "gcc", "target.c", "-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-g", "-pthread")
	dir := t.TempDir()
	dbg := filepath.Join(dir, "target.debug")
	stripped := filepath.Join(dir, "target")
	for _, args := range [][]string{{"--only-keep-debug", bin, dbg}, {"--strip-debug", bin, stripped}} {
		if out, err := exec.Command(objcopy, args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %v: %v\n%s", args, err, out)
		}
	}
	bf, err := os.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	df, err := os.Open(dbg)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	tab, err := LoadTable(bf, df)
	if err != nil {
		t.Fatal(err)
	}
	compareTable(t, tab, dbg, ".debug_frame")
	// Without the debug file, the functions have no rows.
	alone, err := LoadTable(bf, nil)
	if err != nil {
		t.Fatal(err)
	}
	fdes, _ := parseFramesInterpFile(t, dbg, ".debug_frame")
	for _, fd := range fdes {
		if _, ok := alone.Find(fd.begin); ok {
			t.Errorf("stripped binary alone has a row at %#x", fd.begin)
			break
		}
	}
}

func parseFramesInterpFile(t *testing.T, path, section string) ([]readelfFDE, map[string][]readelfRow) {
	out, err := exec.Command(needTool(t, "readelf"), "--debug-dump=frames-interp", path).Output()
	if err != nil && len(out) == 0 {
		t.Fatal(err)
	}
	return parseFramesInterp(t, out, section)
}
