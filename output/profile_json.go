package output

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"stackshot/report"
	"strings"
	"time"
)

// The JSON of `record --format json` (schema 1, kind "profile"):
//
//	{
//	  "schema": 1,
//	  "kind": "profile",
//	  "start": "2026-11-30T12:00:00Z",        // RFC 3339, UTC, when sampling began
//	  "duration_ns": 10000000000,             // how long sampling ran
//	  "freq_hz": 99,                          // requested samples per second
//	  "per_thread": false,
//	  "clock": "cpu",                         // "cpu": samples of running threads only (on-CPU);
//	                                          // "wall": every thread at every tick (record --idle)
//	  "processes": [{"pid": 1234, "comm": "myserver", "exe": "/usr/sbin/myserver"}],
//	  "stats": {
//	    "ticks": 990,                         // sampling instants
//	    "samples": 3960,                      // thread stacks taken (sum of counts)
//	    "achieved_hz": 98.9,                  // ticks per second achieved
//	    "threads": 4,                         // distinct threads seen
//	    "truncated": 3,                       // stacks that did not reach their root
//	    "truncated_by_reason": {"depth": 2, "no-cfi": 1},
//	    "pause_us": {"median": 12.5, "p99": 40.1, "max": 88},  // per-thread ptrace pause
//	    "no_stop": 3000, "stopped": 950, "proc_only": 10,      // how thread samples were taken
//	    "sampler": "perf",                    // running threads: "perf" (perf events, no stop) or "ptrace" (stopped)
//	    "sampler_why": "...",                 // why not perf, or what perf could not do (omitted when nothing)
//	    "perf": 2990, "perf_held": 40,        // samples from perf events (within no_stop); of those, a runnable
//	                                          // thread's latest sample, taken before it waited for a CPU
//	    "perf_lost": 0,                       // perf samples the kernel dropped (a ring buffer was full)
//	    "caught_up": 12,                      // of ticks, instants a late tick stood for (perf only)
//	    "perf_none": 1,                       // running threads left out: no perf sample of them yet
//	    "exited": false,                      // every target exited before the end
//	    "off_cpu": 2970,                      // clock "cpu": thread captures left out, not running
//	    "unique_stacks": 57                   // distinct stacks across threads (by function)
//	  },
//	  "stacks": [
//	    {"pid": 1234, "tid": 1236, "thread": "worker-1", "count": 742,
//	     "frames": [ ...innermost first, each as in `dump --json`... ]}
//	  ]
//	}
//
// Stacks are ordered by count, largest first, then pid, thread, tid;
// samples without a count are left out, as in every profile format. A
// stack's tid is a representative: threads with the same name and stack
// share one entry.

type jsonProfile struct {
	Schema     int                  `json:"schema"`
	Kind       string               `json:"kind"`
	Start      string               `json:"start"`
	DurationNS int64                `json:"duration_ns"`
	FreqHz     int                  `json:"freq_hz"`
	PerThread  bool                 `json:"per_thread"`
	Clock      string               `json:"clock"`
	Processes  []jsonProfileProcess `json:"processes"`
	Stats      jsonProfileStats     `json:"stats"`
	Stacks     []jsonStack          `json:"stacks"`
}

type jsonProfileProcess struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	Exe  string `json:"exe"`
}

type jsonPause struct {
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

type jsonProfileStats struct {
	Ticks       int64            `json:"ticks"`
	Samples     int64            `json:"samples"`
	AchievedHz  float64          `json:"achieved_hz"`
	Threads     int              `json:"threads"`
	Truncated   int64            `json:"truncated"`
	TruncatedBy map[string]int64 `json:"truncated_by_reason"`
	PauseUS     jsonPause        `json:"pause_us"`
	NoStop      int64            `json:"no_stop"`
	Stopped     int64            `json:"stopped"`
	ProcOnly    int64            `json:"proc_only"`
	Exited      bool             `json:"exited"`
	OffCPU      int64            `json:"off_cpu"`
	Unique      int              `json:"unique_stacks"`
	Sampler     string           `json:"sampler,omitempty"`
	SamplerWhy  string           `json:"sampler_why,omitempty"`
	Perf        int64            `json:"perf"`
	PerfHeld    int64            `json:"perf_held"`
	PerfLost    int64            `json:"perf_lost"`
	CaughtUp    int64            `json:"caught_up"`
	PerfNone    int64            `json:"perf_none"`
}

type jsonStack struct {
	PID    int         `json:"pid"`
	TID    int         `json:"tid"`
	Thread string      `json:"thread"`
	Count  int64       `json:"count"`
	Frames []jsonFrame `json:"frames"`
}

// frameJSON renders a frame exactly as `dump --json` does.
func frameJSON(f *report.Frame) jsonFrame {
	jf := jsonFrame{Kind: f.Kind, Inlined: f.Inlined, Method: f.Method,
		BuildIDMismatch: f.BuildIDMismatch, ModuleMissing: f.ModuleMissing, SignalFrame: f.SignalFrame,
		File: f.File, Line: f.Line, BuildID: f.BuildID, Module: f.Module, FrameType: f.FrameType.String()}
	if f.Kind != "python" {
		pc := hex(f.PC)
		jf.PC = &pc
	}
	if f.Function != "" {
		fn := f.Function
		jf.Function = &fn
		if f.HasOffset {
			off := f.Offset
			jf.Offset = &off
		}
	}
	if f.HasModule {
		jf.ModuleOffset = hex(f.ModuleOffset)
	}
	if f.Kind == "python" && jf.Function != nil {
		// (the compiler makes co_name co_qualname's last part)
		jf.QualName = f.Function
		short := f.Function[strings.LastIndexByte(f.Function, '.')+1:]
		jf.Function = &short
	}
	return jf
}

// inlinedOffsets gives each inlined frame the offset of the frame it was
// inlined into (the next one that is not inlined, at the same pc): where pc
// lies in the function whose code holds it. DWARF gives an inlined
// function no entry of its own to count from.
func inlinedOffsets(frames []jsonFrame) {
	for i := range frames {
		if !frames[i].Inlined || frames[i].Offset != nil {
			continue
		}
		for j := i + 1; j < len(frames) && samePC(&frames[j], &frames[i]); j++ {
			if !frames[j].Inlined {
				frames[i].Offset = frames[j].Offset
				break
			}
		}
	}
}

// samePC reports whether two frames have one pc.
func samePC(a, b *jsonFrame) bool {
	return a.PC != nil && b.PC != nil && *a.PC == *b.PC
}

// WriteProfileJSON writes p as the JSON object documented above.
func WriteProfileJSON(w io.Writer, p *Profile) error {
	jp := jsonProfile{
		Schema:     Schema,
		Kind:       "profile",
		DurationNS: p.Duration.Nanoseconds(),
		FreqHz:     p.FreqHz,
		PerThread:  p.PerThread,
		Clock:      "cpu",
		Processes:  make([]jsonProfileProcess, 0, len(p.Processes)),
		Stacks:     make([]jsonStack, 0, len(p.Samples)),
	}
	if p.OffCPU {
		jp.Clock = "wall"
	}
	if !p.Start.IsZero() {
		jp.Start = p.Start.UTC().Format(time.RFC3339Nano)
	}
	for _, pr := range p.Processes {
		jp.Processes = append(jp.Processes, jsonProfileProcess{PID: pr.PID, Comm: pr.Comm, Exe: pr.Exe})
	}
	st := &p.Stats
	jp.Stats = jsonProfileStats{
		Ticks: st.Ticks, Samples: st.Samples, AchievedHz: st.AchievedHz, Threads: st.Threads,
		Truncated: st.Truncated, TruncatedBy: map[string]int64{},
		PauseUS: jsonPause{Median: st.PauseMedUS, P99: st.PauseP99US, Max: st.PauseMaxUS},
		NoStop:  st.NoStop, Stopped: st.Stopped, ProcOnly: st.ProcOnly, Exited: st.Exited,
		OffCPU: st.OffCPU, Unique: st.UniqueStacks,
		Sampler: st.Sampler, SamplerWhy: st.SamplerWhy, Perf: st.Perf, PerfHeld: st.PerfHeld, PerfLost: st.PerfLost,
		CaughtUp: st.CaughtUp, PerfNone: st.PerfNone,
	}
	for k, v := range st.TruncatedWhy {
		jp.Stats.TruncatedBy[k] = v
	}
	for i := range p.Samples {
		s := &p.Samples[i]
		if s.Count <= 0 {
			continue
		}
		js := jsonStack{PID: s.PID, TID: s.TID, Thread: s.Thread, Count: s.Count,
			Frames: make([]jsonFrame, 0, len(s.Frames))}
		for j := range s.Frames {
			js.Frames = append(js.Frames, frameJSON(&s.Frames[j]))
		}
		inlinedOffsets(js.Frames)
		jp.Stacks = append(jp.Stacks, js)
	}
	sort.SliceStable(jp.Stacks, func(i, j int) bool {
		a, b := &jp.Stacks[i], &jp.Stacks[j]
		switch {
		case a.Count != b.Count:
			return a.Count > b.Count
		case a.PID != b.PID:
			return a.PID < b.PID
		case a.Thread != b.Thread:
			return a.Thread < b.Thread
		}
		return a.TID < b.TID
	})
	return writeProfileJSON(w, &jp)
}

// writeProfileJSON writes the object indented, except that each stack is
// one line: a long recording has many stacks, and a line per stack keeps
// the file small, streamable and easy to grep.
func writeProfileJSON(w io.Writer, jp *jsonProfile) error {
	stacks := jp.Stacks
	jp.Stacks = nil
	head, err := json.MarshalIndent(jp, "", "  ")
	jp.Stacks = stacks
	if err != nil {
		return fmt.Errorf("encoding profile json: %w", err)
	}
	// head ends with `"stacks": null` and the closing brace.
	const tail = `"stacks": null` + "\n}"
	if !bytes.HasSuffix(head, []byte(tail)) {
		return fmt.Errorf("encoding profile json: unexpected layout")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(head[:len(head)-len(tail)])
	if len(stacks) == 0 {
		bw.WriteString("\"stacks\": []\n}\n")
		return bw.Flush()
	}
	bw.WriteString("\"stacks\": [\n")
	for i := range stacks {
		bw.WriteString("    ")
		b, err := json.Marshal(&stacks[i])
		if err != nil {
			return fmt.Errorf("encoding profile json: %w", err)
		}
		bw.Write(b)
		if i < len(stacks)-1 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
	}
	bw.WriteString("  ]\n}\n")
	return bw.Flush()
}
