package procmaps

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		line    string
		want    Mapping
		wantErr bool
	}{
		{
			line: "55d0c0a02000-55d0c0a05000 r-xp 00002000 fd:01 1835123                    /usr/bin/my server (deleted)",
			want: Mapping{Start: 0x55d0c0a02000, End: 0x55d0c0a05000, Perms: "r-xp", Offset: 0x2000, DevMajor: 0xfd, DevMinor: 1,
				Inode: 1835123, Path: "/usr/bin/my server", Deleted: true, Kind: KindFile},
		},
		{
			line: "7f1e3c5cd000-7f1e3c722000 r-xp 00026000 103:02 2621571                   /usr/lib/x86_64-linux-gnu/libc.so.6",
			want: Mapping{Start: 0x7f1e3c5cd000, End: 0x7f1e3c722000, Perms: "r-xp", Offset: 0x26000, DevMajor: 0x103, DevMinor: 2,
				Inode: 2621571, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6", Kind: KindFile},
		},
		{
			line: "7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 ",
			want: Mapping{Start: 0x7f1e2c000000, End: 0x7f1e2c021000, Perms: "rw-p", Kind: KindAnon},
		},
		{
			line: "7f1e3c77b000-7f1e3c77d000 r-xp 00000000 00:00 0                          [vdso]",
			want: Mapping{Start: 0x7f1e3c77b000, End: 0x7f1e3c77d000, Perms: "r-xp", Path: "[vdso]", Kind: KindVDSO},
		},
		{
			line: "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
			want: Mapping{Start: 0xffffffffff600000, End: 0xffffffffff601000, Perms: "--xp", Path: "[vsyscall]", Kind: KindVsyscall},
		},
		{
			line: "7ffd5b6c1000-7ffd5b6e2000 rw-p 00000000 00:00 0                          [stack]",
			want: Mapping{Start: 0x7ffd5b6c1000, End: 0x7ffd5b6e2000, Perms: "rw-p", Path: "[stack]", Kind: KindStack},
		},
		{
			line: "7f1e34000000-7f1e34001000 rw-p 00000000 00:00 0                          [anon:thread stack]",
			want: Mapping{Start: 0x7f1e34000000, End: 0x7f1e34001000, Perms: "rw-p", Path: "[anon:thread stack]", Kind: KindNamedAnon},
		},
		{
			line: "7f1e30000000-7f1e30400000 r-xp 00000000 00:01 4096                       /memfd:jit-code (deleted)",
			want: Mapping{Start: 0x7f1e30000000, End: 0x7f1e30400000, Perms: "r-xp", DevMinor: 1, Inode: 4096,
				Path: "/memfd:jit-code", Deleted: true, Kind: KindMemfd},
		},
		{
			// A path that itself ends in spaces keeps them.
			line: "1000-2000 r--p 00000000 08:01 12 /tmp/trailing  ",
			want: Mapping{Start: 0x1000, End: 0x2000, Perms: "r--p", DevMajor: 8, DevMinor: 1, Inode: 12, Path: "/tmp/trailing  ", Kind: KindFile},
		},
		{line: "zzzz-2000 r--p 00000000 08:01 12 /x", wantErr: true},
		{line: "2000-1000 r--p 00000000 08:01 12 /x", wantErr: true},
		{line: "1000-2000 r--pp 00000000 08:01 12 /x", wantErr: true},
		{line: "1000-2000 r--p 00000000 0801 12 /x", wantErr: true},
		{line: "1000-2000 r--p 00000000 08:01 -12 /x", wantErr: true},
		{line: "1000-2000", wantErr: true},
		{line: "10000000000000000-2 r--p 0 0:0 0", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseLine([]byte(tt.line))
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParseLine(%q) = %+v, want an error", tt.line, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLine(%q): %v", tt.line, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseLine(%q)\n got %+v\nwant %+v", tt.line, got, tt.want)
		}
	}
}

func TestParseMapsFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/maps/*.maps")
	if len(files) == 0 {
		t.Fatal("no seed maps files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := ParseMaps(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if want := strings.Count(strings.TrimSpace(string(b)), "\n") + 1; len(ms) != want {
			t.Errorf("%s: %d mappings, want %d", f, len(ms), want)
		}
	}
}

func TestMapsFind(t *testing.T) {
	ms := Maps{{Start: 0x1000, End: 0x2000}, {Start: 0x3000, End: 0x5000}, {Start: 0x5000, End: 0x6000}}
	for addr, want := range map[uint64]int{0x1000: 0, 0x1fff: 0, 0x2000: -1, 0x4000: 1, 0x5000: 2, 0x6000: -1, 0: -1} {
		m, ok := ms.Find(addr)
		switch {
		case want < 0 && ok:
			t.Errorf("Find(%#x) = %+v, want none", addr, m)
		case want >= 0 && (!ok || m.Start != ms[want].Start):
			t.Errorf("Find(%#x) = %+v %v, want %+v", addr, m, ok, ms[want])
		}
	}
}

func TestParseSyscall(t *testing.T) {
	s, err := ParseSyscall([]byte("202 0x55d0c0a05108 0x189 0x0 0x0 0x0 0xffffffff 0x7f1e2bffed60 0x7f1e3c61bf16\n"))
	if err != nil || !s.InCall || s.Nr != 202 || s.Args[0] != 0x55d0c0a05108 || s.Args[5] != 0xffffffff ||
		s.SP != 0x7f1e2bffed60 || s.PC != 0x7f1e3c61bf16 {
		t.Errorf("blocked: %+v %v", s, err)
	}
	s, err = ParseSyscall([]byte("running\n"))
	if err != nil || !s.Running || s.InCall {
		t.Errorf("running: %+v %v", s, err)
	}
	s, err = ParseSyscall([]byte("-1 0x7ffd5b6e1000 0x55d0c0a02010\n"))
	if err != nil || s.InCall || s.Nr != -1 || s.SP != 0x7ffd5b6e1000 || s.PC != 0x55d0c0a02010 {
		t.Errorf("not in a syscall: %+v %v", s, err)
	}
	for _, bad := range []string{"", "x 1 2", "1 2", "202 0x1 0x2", "0 zz 0 0 0 0 0 0 0"} {
		if _, err := ParseSyscall([]byte(bad)); err == nil {
			t.Errorf("ParseSyscall(%q): want an error", bad)
		}
	}
}

func TestParseKernelStack(t *testing.T) {
	in := "[<0>] futex_wait_queue+0x7d/0xd0\n[<0>] do_futex+0x11e/0x1a0 [somemod]\n[<ffffffff81234567>] 0xffffffff81234567\n[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e\n"
	ks := ParseKernelStack([]byte(in))
	if len(ks) != 4 {
		t.Fatalf("got %d frames: %+v", len(ks), ks)
	}
	if ks[0].Function != "futex_wait_queue" || ks[0].Offset != 0x7d || ks[0].Size != 0xd0 {
		t.Errorf("frame 0: %+v", ks[0])
	}
	if ks[1].Function != "do_futex" || ks[1].Offset != 0x11e {
		t.Errorf("frame 1: %+v", ks[1])
	}
	if ks[2].Function != "" || ks[2].Addr != 0xffffffff81234567 {
		t.Errorf("frame 2 (address only): %+v", ks[2])
	}
}

// forLines splits as bufio.ScanLines does: "\r\n" and a last line
// without "\n" included, no empty token after the last "\n".
func TestForLines(t *testing.T) {
	for in, want := range map[string][]string{
		"":                nil,
		"a":               {"a"},
		"a\n":             {"a"},
		"a\r\nb":          {"a", "b"},
		"\n\nx\n\n":       {"", "", "x", ""},
		"one\ntwo\nthree": {"one", "two", "three"},
	} {
		var got []string
		forLines([]byte(in), func(l string) bool { got = append(got, l); return true })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("forLines(%q) = %q, want %q", in, got, want)
		}
	}
	n := 0
	forLines([]byte("1\n2\n3\n"), func(string) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("forLines went on after false: %d calls", n)
	}
}

func TestParseStatus(t *testing.T) {
	st := ParseStatus([]byte("Name:\tmy: name\r\nState:\tS (sleeping)\nTgid:\t42\nPPid:\t1\nTracerPid:\t0\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t6\t7\t8\nno colon here\nnonvoluntary_ctxt_switches:\t9"))
	if st.Name != "my: name" || st.State != 'S' || st.Tgid != 42 || st.PPid != 1 || st.UID != 1000 ||
		st.UIDs != [4]int{1000, 1001, 1002, 1003} || st.GIDs != [4]int{5, 6, 7, 8} || st.NonVolCtx != 9 {
		t.Errorf("%+v", st)
	}
}

// A kernel stack is bounded to 256 frames, however long the file.
func TestParseKernelStackBound(t *testing.T) {
	if n := len(ParseKernelStack(bytes.Repeat([]byte("[<0>] f+0x1/0x2\n"), 1000))); n != 256 {
		t.Errorf("%d frames, want 256", n)
	}
}

// fieldsInto splits as strings.Fields does, up to its bound.
func TestFieldsInto(t *testing.T) {
	for _, in := range []string{"", "  ", "a", " S 1  2\t3\n4 ", "x\vy\fz\rw", strings.Repeat("f ", 50)} {
		var dst [37]string
		got := fieldsInto(dst[:], in)
		want := strings.Fields(in)
		if len(want) > len(dst) {
			want = want[:len(dst)]
		}
		if !slices.Equal(got, want) {
			t.Errorf("fieldsInto(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseStat(t *testing.T) {
	st, err := ParseStat([]byte("1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 4 0 98765 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"))
	if err != nil || st.Comm != "my (odd) name" || st.State != 'S' || st.PPID != 1 || st.StartTime != 98765 || st.Processor != 1 {
		t.Errorf("%+v %v", st, err)
	}
	if _, err := ParseStat([]byte("1234 (x")); err == nil {
		t.Error("truncated stat: want an error")
	}
}

func TestLiveSelf(t *testing.T) {
	pid := os.Getpid()
	ms, err := ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	found := false
	for _, m := range ms {
		if m.Path == exe && m.Executable() {
			found = true
		}
	}
	if !found {
		t.Errorf("no executable mapping of %s", exe)
	}
	tids, err := Tasks(pid)
	if err != nil || len(tids) == 0 || tids[0] != pid {
		t.Errorf("Tasks: %v %v", tids, err)
	}
	// Reads through the shared buffers: each answer is its own file's.
	for range 3 {
		st, err := ReadStatus(pid)
		if err != nil || st.Tgid != pid || st.Name == "" {
			t.Errorf("ReadStatus: %+v %v", st, err)
		}
		ps, err := ReadProcStat(pid)
		if err != nil || ps.Comm != st.Name || ps.PPID != os.Getppid() {
			t.Errorf("ReadProcStat: %+v %v (status name %q)", ps, err, st.Name)
		}
		if _, err := ReadSchedStat(pid, pid); err != nil {
			t.Errorf("ReadSchedStat: %v", err)
		}
		if sc, err := ReadSyscall(pid, tids[len(tids)-1]); err != nil {
			t.Errorf("ReadSyscall: %+v %v", sc, err)
		}
		if auxv, err := ReadAuxv(pid); err != nil || len(auxv) == 0 || len(auxv)%16 != 0 {
			t.Errorf("ReadAuxv: %d bytes, %v", len(auxv), err)
		}
	}
	if _, err := ReadStatus(1 << 30); err == nil {
		t.Error("ReadStatus of no process: no error")
	}
}

// FuzzMaps checks that the maps parser never panics and that whatever it
// accepts is well-formed.
func FuzzMaps(f *testing.F) {
	files, _ := filepath.Glob("testdata/maps/*.maps")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err == nil {
			f.Add(b)
			for _, l := range bytes.Split(b, []byte("\n")) {
				f.Add(l)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseMaps(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.End < m.Start || len(m.Perms) != 4 {
				t.Fatalf("accepted a bad mapping: %+v", m)
			}
		}
		ParseSyscall(data)
		ParseKernelStack(data)
		ParseStat(data)
		ParseStatus(data)
	})
}
