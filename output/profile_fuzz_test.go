package output

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"regexp"
	"stackshot/report"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/pprof/profile"
)

var foldedLine = regexp.MustCompile(`^([^\n]+) ([0-9]+)$`)

// FuzzProfileWriters feeds target-controlled strings (comm, thread,
// function, module and file names) to every writer: folded lines must still
// split into a stack and a count, the SVG must parse as XML, the pprof must
// parse, the JSON must decode.
func FuzzProfileWriters(f *testing.F) {
	f.Add("myserver", "worker-1", "hot_a", "/usr/sbin/myserver", "hot.c", false, false, uint64(0x1234))
	f.Add("a;b", "t\nx", "operator<<(std::ostream&, Foo const&)", "/lib/libx.so", "", true, true, uint64(0))
	f.Add("\xff\xfe", "]]>", "<![CDATA[", "[anon:jit]", "\x00", false, true, uint64(1<<63))
	f.Fuzz(func(t *testing.T, comm, thread, fn, module, file string, kernel, inl bool, off uint64) {
		kind := "user"
		if kernel {
			kind = "kernel"
		}
		leaf := report.Frame{PC: 0x1000 + off, Kind: kind, Function: fn, Module: module, HasModule: module != "",
			ModuleOffset: off, File: file, Line: 3, Method: "cfi"}
		caller := report.Frame{PC: 0x2000, Kind: "user", Function: fn + "_caller", Module: module, HasModule: true, ModuleOffset: 0x2000, Method: "cfi"}
		var frames []report.Frame
		if inl {
			in := caller
			in.Function, in.Inlined = fn, true
			frames = []report.Frame{leaf, in, caller}
		} else {
			frames = []report.Frame{leaf, caller}
		}
		p := &Profile{FreqHz: 99, PerThread: true, Processes: []ProfileProcess{{PID: 1, Comm: comm, Exe: module}},
			Samples: []Sample{
				{PID: 1, TID: 1, Thread: thread, Count: 2, Frames: frames},
				{PID: 1, TID: 2, Thread: thread, Count: 3},
			}}

		var buf bytes.Buffer
		if err := WriteFolded(&buf, p); err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
			m := foldedLine.FindStringSubmatch(line)
			if m == nil || !utf8.ValidString(line) {
				t.Fatalf("bad folded line %q", line)
			}
			n, _ := strconv.ParseInt(m[2], 10, 64)
			sum += n
			if c := strings.Count(m[1], ";"); c != 1 && c != 1+len(frames) {
				t.Fatalf("folded line %q has %d separators", line, c)
			}
		}
		if sum != 5 {
			t.Fatalf("folded counts add to %d", sum)
		}

		buf.Reset()
		if err := WriteSVG(&buf, p); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("SVG: %v", err)
			}
		}
		name, _ := frameName(&leaf)
		if !bytes.Contains(buf.Bytes(), []byte("<title>"+xmlEscape(name)+" (")) {
			t.Fatalf("SVG lacks %q", name)
		}

		buf.Reset()
		if err := WritePprof(&buf, p); err != nil {
			t.Fatal(err)
		}
		pp, err := profile.Parse(&buf)
		if err != nil {
			t.Fatalf("pprof: %v", err)
		}
		for _, fn := range pp.Function {
			if !utf8.ValidString(fn.Name) || strings.ContainsAny(fn.Name, "\n\r") {
				t.Fatalf("pprof function name %q", fn.Name)
			}
		}

		buf.Reset()
		if err := WriteProfileJSON(&buf, p); err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
			t.Fatalf("json: %v", err)
		}
		if err := WriteProfileText(io.Discard, p, 5); err != nil {
			t.Fatal(err)
		}
	})
}
