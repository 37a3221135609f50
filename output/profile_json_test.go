package output

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"stackshot/internal/testutil"
	"stackshot/report"
	"strconv"
	"testing"
	"time"
)

// The test's own reading of the profile JSON, field by field as documented.
type readProfile struct {
	Schema     int    `json:"schema"`
	Kind       string `json:"kind"`
	Start      string `json:"start"`
	DurationNS int64  `json:"duration_ns"`
	FreqHz     int    `json:"freq_hz"`
	PerThread  bool   `json:"per_thread"`
	Clock      string `json:"clock"`
	Processes  []struct {
		PID  int    `json:"pid"`
		Comm string `json:"comm"`
		Exe  string `json:"exe"`
	} `json:"processes"`
	Stats struct {
		Ticks       int64            `json:"ticks"`
		Samples     int64            `json:"samples"`
		AchievedHz  float64          `json:"achieved_hz"`
		Threads     int              `json:"threads"`
		Truncated   int64            `json:"truncated"`
		TruncatedBy map[string]int64 `json:"truncated_by_reason"`
		PauseUS     struct {
			Median float64 `json:"median"`
			P99    float64 `json:"p99"`
			Max    float64 `json:"max"`
		} `json:"pause_us"`
		NoStop     int64  `json:"no_stop"`
		Stopped    int64  `json:"stopped"`
		ProcOnly   int64  `json:"proc_only"`
		Exited     bool   `json:"exited"`
		OffCPU     int64  `json:"off_cpu"`
		Unique     int    `json:"unique_stacks"`
		Sampler    string `json:"sampler"`
		SamplerWhy string `json:"sampler_why"`
		Perf       int64  `json:"perf"`
		PerfHeld   int64  `json:"perf_held"`
		PerfLost   int64  `json:"perf_lost"`
		CaughtUp   int64  `json:"caught_up"`
		PerfNone   int64  `json:"perf_none"`
	} `json:"stats"`
	Stacks []struct {
		PID    int               `json:"pid"`
		TID    int               `json:"tid"`
		Thread string            `json:"thread"`
		Count  int64             `json:"count"`
		Frames []json.RawMessage `json:"frames"`
	} `json:"stacks"`
}

type readFrame = testutil.JSONFrame

func parseHex(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return v
}

// backToProfile rebuilds a Profile from the JSON.
func backToProfile(t *testing.T, r *readProfile) *Profile {
	t.Helper()
	start, err := time.Parse(time.RFC3339Nano, r.Start)
	if err != nil {
		t.Fatalf("start %q: %v", r.Start, err)
	}
	p := &Profile{Start: start, Duration: time.Duration(r.DurationNS), FreqHz: r.FreqHz, PerThread: r.PerThread,
		OffCPU: r.Clock == "wall"}
	for _, pr := range r.Processes {
		p.Processes = append(p.Processes, ProfileProcess{PID: pr.PID, Comm: pr.Comm, Exe: pr.Exe})
	}
	st := &r.Stats
	p.Stats = Stats{Ticks: st.Ticks, Samples: st.Samples, AchievedHz: st.AchievedHz, Threads: st.Threads,
		Truncated: st.Truncated, TruncatedWhy: st.TruncatedBy, PauseMedUS: st.PauseUS.Median,
		PauseP99US: st.PauseUS.P99, PauseMaxUS: st.PauseUS.Max, NoStop: st.NoStop, Stopped: st.Stopped,
		ProcOnly: st.ProcOnly, Exited: st.Exited, OffCPU: st.OffCPU, UniqueStacks: st.Unique,
		Sampler: st.Sampler, SamplerWhy: st.SamplerWhy, Perf: st.Perf, PerfHeld: st.PerfHeld, PerfLost: st.PerfLost,
		CaughtUp: st.CaughtUp, PerfNone: st.PerfNone}
	for _, s := range r.Stacks {
		smp := Sample{PID: s.PID, TID: s.TID, Thread: s.Thread, Count: s.Count}
		for _, raw := range s.Frames {
			var rf readFrame
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rf); err != nil {
				t.Fatalf("frame %s: %v", raw, err)
			}
			f := report.Frame{PC: parseHex(t, rf.PC), Kind: rf.Kind, Module: rf.Module, BuildID: rf.BuildID,
				File: rf.File, Line: rf.Line, Inlined: rf.Inlined, Method: rf.Method,
				BuildIDMismatch: rf.BuildIDMismatch, SignalFrame: rf.SignalFrame}
			if rf.Function != nil {
				f.Function = *rf.Function
			}
			if rf.Offset != nil {
				f.Offset, f.HasOffset = *rf.Offset, true
			}
			if rf.ModuleOffset != "" {
				f.ModuleOffset, f.HasModule = parseHex(t, rf.ModuleOffset), true
			}
			smp.Frames = append(smp.Frames, f)
		}
		p.Samples = append(p.Samples, smp)
	}
	return p
}

func sortSamples(s []Sample) {
	sort.SliceStable(s, func(i, j int) bool {
		a, b := &s[i], &s[j]
		if a.Count != b.Count {
			return a.Count < b.Count
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.TID < b.TID
	})
}

func TestProfileJSONRoundTrip(t *testing.T) {
	p := fixtureProfile()
	p.Start = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	p.Duration = 9*time.Second + 987654321
	p.Stats.Exited = true
	p.Stats.OffCPU, p.Stats.UniqueStacks = 17, 3
	p.Stats.Sampler, p.Stats.SamplerWhy = "perf", "kernel profiling refused: a thread is sampled only while it runs user code"
	p.Stats.Perf, p.Stats.PerfHeld, p.Stats.PerfLost, p.Stats.CaughtUp, p.Stats.PerfNone = 40, 12, 2, 5, 1
	p.OffCPU = true // "clock": "wall"
	// A signal frame and a build-id mismatch, as dump would show them.
	p.Samples[7].Frames = append([]report.Frame{
		{PC: 0x7f1100042520, Kind: "user", Function: "__restore_rt", Module: fxLibc, HasModule: true,
			ModuleOffset: 0x42520, BuildID: fxLibcID, Method: "signal", SignalFrame: true},
		{PC: 0x7f2200001000, Kind: "user", Module: "/opt/x.so", HasModule: true, ModuleOffset: 0x1000,
			BuildID: "ff", Method: "cfi", BuildIDMismatch: true},
	}, p.Samples[7].Frames...)
	var buf bytes.Buffer
	if err := WriteProfileJSON(&buf, p); err != nil {
		t.Fatal(err)
	}
	var r readProfile
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("decoding: %v\n%s", err, buf.String())
	}
	if r.Schema != 1 || r.Kind != "profile" {
		t.Errorf("schema %d kind %q", r.Schema, r.Kind)
	}
	if r.Start != "2026-11-30T11:00:00.123456789Z" {
		t.Errorf("start %q, want UTC", r.Start)
	}
	// Stacks by count, largest first.
	for i := 1; i < len(r.Stacks); i++ {
		if r.Stacks[i].Count > r.Stacks[i-1].Count {
			t.Errorf("stacks out of order at %d", i)
		}
	}
	if r.Stacks[0].Count != 60 {
		t.Errorf("first stack has %d", r.Stacks[0].Count)
	}

	back := backToProfile(t, &r)
	want := *p
	want.Start = p.Start.UTC()
	want.Samples = nil
	for _, s := range p.Samples {
		if s.Count > 0 {
			want.Samples = append(want.Samples, withInlinedOffsets(s))
		}
	}
	sortSamples(want.Samples)
	sortSamples(back.Samples)
	if !reflect.DeepEqual(back, &want) {
		gb, _ := json.MarshalIndent(back, "", " ")
		gw, _ := json.MarshalIndent(&want, "", " ")
		t.Errorf("round trip differs:\n got %s\nwant %s", gb, gw)
	}
}

// A stack's frames have exactly the shape `dump --json` gives the same
// frames.
func TestProfileJSONFramesMatchDump(t *testing.T) {
	p := fixtureProfile()
	var buf bytes.Buffer
	if err := WriteProfileJSON(&buf, p); err != nil {
		t.Fatal(err)
	}
	var prof struct {
		Stacks []struct {
			TID    int               `json:"tid"`
			Count  int64             `json:"count"`
			Frames []json.RawMessage `json:"frames"`
		} `json:"stacks"`
	}
	if err := json.Unmarshal(buf.Bytes(), &prof); err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Samples {
		if s.Count == 0 {
			continue
		}
		proc := &report.Process{PID: s.PID, Threads: []report.Thread{{TID: s.TID, Frames: s.Frames}}}
		var dbuf bytes.Buffer
		if err := JSON(&dbuf, []*report.Process{proc}); err != nil {
			t.Fatal(err)
		}
		var dump struct {
			Threads []struct {
				Frames []json.RawMessage `json:"frames"`
			} `json:"threads"`
		}
		if err := json.Unmarshal(dbuf.Bytes(), &dump); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, st := range prof.Stacks {
			if st.TID != s.TID || st.Count != s.Count {
				continue
			}
			found = true
			if len(st.Frames) != len(dump.Threads[0].Frames) {
				t.Fatalf("tid %d: %d frames, dump has %d", s.TID, len(st.Frames), len(dump.Threads[0].Frames))
			}
			for i := range st.Frames {
				var a, b any
				json.Unmarshal(st.Frames[i], &a)
				json.Unmarshal(dump.Threads[0].Frames[i], &b)
				if !reflect.DeepEqual(a, b) {
					t.Errorf("tid %d frame %d:\n profile %s\n    dump %s", s.TID, i, st.Frames[i], dump.Threads[0].Frames[i])
				}
			}
		}
		if !found {
			t.Errorf("no stack for tid %d count %d", s.TID, s.Count)
		}
	}
}

func TestProfileJSONEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteProfileJSON(&buf, &Profile{}); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if s, ok := m["stacks"].([]any); !ok || len(s) != 0 {
		t.Errorf("stacks %v, want []", m["stacks"])
	}
	if p, ok := m["processes"].([]any); !ok || len(p) != 0 {
		t.Errorf("processes %v, want []", m["processes"])
	}
}

// withInlinedOffsets is s as its JSON carries it: an inlined frame with the
// offset of the frame it was inlined into.
func withInlinedOffsets(s Sample) Sample {
	s.Frames = append([]report.Frame(nil), s.Frames...)
	for i := range s.Frames {
		f := &s.Frames[i]
		for j := i + 1; f.Inlined && !f.HasOffset && j < len(s.Frames) && s.Frames[j].PC == f.PC; j++ {
			if !s.Frames[j].Inlined {
				f.Offset, f.HasOffset = s.Frames[j].Offset, s.Frames[j].HasOffset
				break
			}
		}
	}
	return s
}
