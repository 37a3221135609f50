package capfile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"stackshot/ptrace"
)

// TestDecodeVersion1File reads a capture written by stackshot before the
// format moved into this package (testdata/v1-sleep.cap: `stackshot
// capture` of /usr/bin/sleep): old files stay readable.
func TestDecodeVersion1File(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "v1-sleep.cap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cf, err := Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if cf.Format != Format || cf.Version != 1 || len(cf.Processes) != 1 {
		t.Fatalf("format %q version %d, %d processes", cf.Format, cf.Version, len(cf.Processes))
	}
	p := cf.Processes[0]
	if p.Comm != "sleep" || len(p.Threads) != 1 || len(p.Maps) == 0 || len(p.VDSO) == 0 {
		t.Fatalf("comm %q, %d threads, %d maps, vdso %d bytes", p.Comm, len(p.Threads), len(p.Maps), len(p.VDSO))
	}
	th := p.Threads[0]
	if th.TID != p.PID || th.Syscall == nil || th.Syscall.PC == 0 || len(th.Stack) == 0 {
		t.Errorf("thread %+v", th)
	}
}

func TestRoundTrip(t *testing.T) {
	in := &File{Host: "h", Kernel: true, Processes: []*ptrace.Process{{
		Arch: "amd64", PID: 7, Comm: "x", Auxv: []byte{1, 2, 3},
		Threads: []ptrace.Thread{{TID: 7, Regs: make([]uint64, 27), Stack: []byte("abc"), StackAddr: 0x1000}},
	}}}
	var buf bytes.Buffer
	if err := Encode(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	p := out.Processes[0]
	if out.Host != "h" || !out.Kernel || p.PID != 7 || string(p.Threads[0].Stack) != "abc" || !bytes.Equal(p.Auxv, []byte{1, 2, 3}) {
		t.Errorf("round trip: %+v %+v", out, p)
	}
}

func gz(t testing.TB, parts ...string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	for _, p := range parts {
		io.WriteString(zw, p)
	}
	zw.Close()
	return b.Bytes()
}

// repeatReader yields prefix, then n copies of unit, then suffix, without
// holding them.
func repeated(prefix, unit string, n int, suffix string) string {
	return prefix + strings.Repeat(unit, n) + suffix
}

func TestDecodeRejects(t *testing.T) {
	head := `{"format":"stackshot-capture","version":1,"processes":[`
	cases := []struct {
		name, data, want string
	}{
		{"not gzip", "hello", "not a stackshot capture"},
		{"other format", `{"format":"other","version":1}`, `format "other"`},
		{"newer version", `{"format":"stackshot-capture","version":2}`, "version 2"},
		{"other arch", head + `{"arch":"ppc64le","pid":1}]}`, `architecture "ppc64le": not supported`},
		{"no arch", head + `{"pid":1}]}`, `architecture "": not supported`},
		{"bad regs", head + `{"arch":"amd64","threads":[{"tid":1,"regs":[1,2]}]}]}`, "2 registers"},
		{"truncated", head + `{"arch":"amd64","pid":1`, "truncated"},
		{"deep", head + strings.Repeat("[", 100), "nesting"},
		{"not json", "\x00\x01", "corrupt"},
		{"no format", `{}`, "no format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(c.data)
			if c.name != "not gzip" {
				data = gz(t, c.data)
			}
			_, err := Decode(bytes.NewReader(data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestDecodeCraftedBounded: files crafted to make a decoder allocate far
// more than their size (issue 11 measured 3.2 GB for one) fail with a
// limit error, and the decoder's allocations stay bounded.
func TestDecodeCraftedBounded(t *testing.T) {
	head := `{"format":"stackshot-capture","version":1,"processes":[{"arch":"amd64","pid":1,`
	cases := []struct{ name, data string }{
		// 3-byte empty objects, each a 120-byte Mapping (past MaxObjects).
		{"many maps", repeated(head+`"maps":[`, `{},`, 1<<20, `{}]}]}`)},
		// 2-byte numbers, each an 8-byte word (past MaxElements).
		{"many regs", repeated(head+`"threads":[{"tid":1,"regs":[`, `0,`, 5<<20, `0]}]}]}`)},
		// One 140 MiB string of stack bytes (past MaxProcessJSON).
		{"huge stack", repeated(head+`"threads":[{"tid":1,"stack":"`, `AAAA`, 35<<20, `"}]}]}`)},
		// Many processes, each small.
		{"many processes", repeated(`{"format":"stackshot-capture","version":1,"processes":[`, `{"arch":"amd64"},`, 100000, `{"arch":"amd64"}]}`)},
		// Thread names of a MiB each.
		{"long names", repeated(head+`"threads":[`, `{"name":"`+strings.Repeat("x", 1<<20)+`"},`, 140, `{}]}]}`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := gz(t, c.data)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Decode(bytes.NewReader(data))
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrLimit) {
				t.Errorf("error %v, want a limit error", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d KiB compressed, %d MiB allocated: %v", len(data)>>10, alloc>>20, err)
			if alloc > 1<<30 {
				t.Errorf("decoding allocated %d MiB, want under 1 GiB", alloc>>20)
			}
		})
	}
}
