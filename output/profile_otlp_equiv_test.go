package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"stackshot/report"
)

// goProfile is a record of a Go server: pclntab frames with Go's names
// (methods on pointer receivers, closures, generics), a runtime thread in
// a signal handler, a frame whose module was missing and one whose build
// id did not match, a thread name and a path in other scripts.
func goProfile() *Profile {
	const exe, id = "/srv/app/bin/сервер", "00aa11bb22cc33dd44ee55ff6677889900aabbcc"
	const bias = 0x400000
	g := func(off uint64, fn, file string, line int) report.Frame {
		return report.Frame{PC: bias + off, Kind: "user", Function: fn, Offset: 0x10, HasOffset: true, Module: exe,
			ModuleOffset: off, HasModule: true, BuildID: id, File: file, Line: line, Method: "pclntab"}
	}
	lock := g(0x7a10, "sync.(*Mutex).Lock", "/usr/local/go/src/sync/mutex.go", 46)
	serve := g(0x12340, "main.(*server).serve.func1", "/src/app/server.go", 88)
	gen := g(0x12800, "main.process[go.shape.string]", "/src/app/generic.go", 12)
	inl := gen
	inl.Function, inl.File, inl.Line, inl.Inlined, inl.HasOffset, inl.Offset = "main.trim", "/src/app/strings.go", 7, true, false, 0
	exit := g(0x6f000, "runtime.goexit", "/usr/local/go/src/runtime/asm_amd64.s", 1700)
	sig := report.Frame{PC: 0x7f00aa000000, Kind: "user", Function: "<signal handler called>", SignalFrame: true, Method: "signal"}
	missing := report.Frame{PC: 0x7f00bb001234, Kind: "user", Module: "/gone/libx.so", ModuleOffset: 0x1234, HasModule: true,
		ModuleMissing: true, Method: "fp"}
	mismatch := g(0x9000, "main.compute", "/src/app/compute.go", 30)
	mismatch.BuildIDMismatch = true
	return &Profile{
		Start: time.Date(2026, 12, 1, 8, 30, 0, 123456789, time.UTC), Duration: 2500 * time.Millisecond, FreqHz: 49,
		Processes: []ProfileProcess{{PID: 900, Comm: "сервер", Exe: exe}},
		Samples: []Sample{
			{PID: 900, TID: 901, Thread: "工作者", Count: 12, Frames: []report.Frame{lock, serve, exit}},
			{PID: 900, TID: 902, Thread: "worker", Count: 30, Frames: []report.Frame{inl, gen, serve, exit}},
			{PID: 900, TID: 903, Thread: "worker", Count: 1, Frames: []report.Frame{sig, mismatch, exit}},
			{PID: 900, TID: 904, Thread: "gc ☃", Count: 2, Frames: []report.Frame{missing, mismatch, exit}},
			// An empty stack (a thread read from /proc only).
			{PID: 900, TID: 905, Thread: "sysmon", Count: 3},
			// A process the recording does not list (it started during it).
			{PID: 977, TID: 977, Thread: "child", Count: 1, Frames: []report.Frame{exit}},
			// Thread id 0: an int attribute of value 0 is still written.
			{PID: 977, TID: 0, Thread: "", Count: 1, Frames: []report.Frame{exit}},
		},
	}
}

// otlpReports are the reports both encodings are compared on.
func otlpReports() map[string]struct {
	p *Profile
	o OTLPOptions
} {
	perThread := fixtureProfile()
	perThread.PerThread = true
	offCPU := goProfile()
	offCPU.OffCPU = true
	empty := fixtureProfile()
	empty.Samples = nil
	unlisted := goProfile()
	unlisted.Processes = nil
	noExe := fixtureProfile()
	noExe.Processes[0].Exe = ""
	noExe.Processes[1].Comm = ""
	type rep = struct {
		p *Profile
		o OTLPOptions
	}
	return map[string]rep{
		"fixture":    {fixtureProfile(), OTLPOptions{Host: "web-7", Version: "v1.2"}},
		"per-thread": {perThread, OTLPOptions{Service: "checkout", Version: "v1.2"}},
		"go":         {goProfile(), OTLPOptions{Host: strings.Repeat("hôte-ü", 40), Service: "サービス", Version: "dev"}},
		"off-cpu":    {offCPU, OTLPOptions{}},
		"empty":      {empty, OTLPOptions{Host: "h"}},
		"unlisted":   {unlisted, OTLPOptions{Version: "v0"}},
		"no-exe":     {noExe, OTLPOptions{}},
		"big":        {benchProfile(300), OTLPOptions{Host: "bench"}},
	}
}

// TestOTLPEncodingMatchesPdata: the hand-written encoding, decoded by the
// Collector's own pdata, is what pdata built and encoded from the same
// report, down to every table entry and index (the profile ids aside:
// they are random; each must be set and unique).
func TestOTLPEncodingMatchesPdata(t *testing.T) {
	for name, r := range otlpReports() {
		t.Run(name, func(t *testing.T) {
			pd, err := ToOTLP(r.p, r.o)
			if err != nil {
				t.Fatal(err)
			}
			var u pprofile.ProtoUnmarshaler
			got, err := u.UnmarshalProfiles(pd.Encode())
			if err != nil {
				t.Fatalf("pdata cannot read the encoding: %v", err)
			}
			old, err := pdataOTLP(r.p, r.o)
			if err != nil {
				t.Fatal(err)
			}
			var m pprofile.ProtoMarshaler
			b, err := m.MarshalProfiles(old)
			if err != nil {
				t.Fatal(err)
			}
			want, err := u.UnmarshalProfiles(b)
			if err != nil {
				t.Fatal(err)
			}
			// The string tables as read, before the JSON form below
			// interns the resources' attribute strings into them (as
			// pdata's wire form does: keys and string values are
			// references into the table).
			if g, w := got.Dictionary().StringTable().AsRaw(), want.Dictionary().StringTable().AsRaw(); !slices.Equal(g, w) {
				t.Errorf("string tables differ:\n got %q\nwant %q", g, w)
			}
			ids := map[pprofile.ProfileID]bool{}
			for _, rp := range got.ResourceProfiles().All() {
				for _, sp := range rp.ScopeProfiles().All() {
					for _, prof := range sp.Profiles().All() {
						id := prof.ProfileID()
						if id.IsEmpty() || ids[id] {
							t.Errorf("profile id %v empty or repeated", id)
						}
						ids[id] = true
					}
				}
			}
			if g, w := otlpDump(t, got), otlpDump(t, want); g != w {
				t.Errorf("decoded encodings differ\n%s", firstDiff(g, w))
			}
			// What the test compares is not empty: the dump holds the
			// report's samples.
			if got.SampleCount() != want.SampleCount() || (len(r.p.Samples) > 0 && got.SampleCount() == 0) {
				t.Errorf("%d samples, pdata's %d", got.SampleCount(), want.SampleCount())
			}
		})
	}
}

// otlpDump is pd in full as indented JSON (pdata's own JSON form), its
// random profile ids cleared.
func otlpDump(t *testing.T, pd pprofile.Profiles) string {
	t.Helper()
	for _, rp := range pd.ResourceProfiles().All() {
		for _, sp := range rp.ScopeProfiles().All() {
			for _, prof := range sp.Profiles().All() {
				prof.SetProfileID(pprofile.ProfileID{})
			}
		}
	}
	var m pprofile.JSONMarshaler
	b, err := m.MarshalProfiles(pd)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", " "); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// firstDiff shows where two dumps part.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			lo := max(0, i-5)
			return fmt.Sprintf("line %d:\n got: %q\nwant: %q\ncontext (got):\n%s", i+1, a, b,
				strings.Join(g[lo:min(len(g), i+1)], "\n"))
		}
	}
	return ""
}

// BenchmarkOTLP10k and BenchmarkOTLPPdata10k: building and encoding the
// OTLP request of 10,000 samples (uncompressed), by hand and as pdata did.
func BenchmarkOTLP10k(b *testing.B) {
	benchWriter(b, func(w io.Writer, p *Profile) error {
		pd, err := ToOTLP(p, OTLPOptions{Host: "bench"})
		if err != nil {
			return err
		}
		_, err = w.Write(pd.Encode())
		return err
	})
}

func BenchmarkOTLPPdata10k(b *testing.B) {
	benchWriter(b, func(w io.Writer, p *Profile) error {
		pd, err := pdataOTLP(p, OTLPOptions{Host: "bench"})
		if err != nil {
			return err
		}
		var m pprofile.ProtoMarshaler
		raw, err := m.MarshalProfiles(pd)
		if err != nil {
			return err
		}
		_, err = w.Write(raw)
		return err
	})
}
