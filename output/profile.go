package output

import (
	"stackshot/report"
	"time"
)

// Profile is what `stackshot record` aggregates: unique stacks with the
// number of times each was seen, plus honest accounting of the run.
type Profile struct {
	Start     time.Time
	Duration  time.Duration // how long sampling ran
	FreqHz    int           // requested samples per second
	PerThread bool          // thread name as the root frame
	// OffCPU says the samples include threads that were not running
	// (record --idle): a wall-clock profile. Otherwise every sample is of
	// a running thread: an on-CPU profile.
	OffCPU    bool
	Processes []ProfileProcess
	Samples   []Sample
	Stats     Stats
}

// ProfileProcess names one sampled process.
type ProfileProcess struct {
	PID  int
	Comm string
	Exe  string
}

// Sample is one unique stack and how often it was seen.
type Sample struct {
	PID    int
	TID    int    // a representative thread id (threads with the same name and stack share a Sample)
	Thread string // thread name
	// Frames are logical frames, innermost first (inlined ones expanded,
	// kernel frames first when recorded with --kernel).
	Frames []report.Frame
	Count  int64
}

// Stats is the accounting printed at the end of a recording.
type Stats struct {
	Ticks        int64            // sampling instants
	Samples      int64            // thread stacks taken (sum of Sample.Count)
	AchievedHz   float64          // ticks per second actually achieved
	Threads      int              // distinct threads seen
	Truncated    int64            // stacks that did not reach their root
	TruncatedWhy map[string]int64 // why, by stop reason
	PauseMedUS   float64          // per-thread ptrace pause
	PauseP99US   float64
	PauseMaxUS   float64
	NoStop       int64 // thread samples taken without a ptrace stop
	Stopped      int64 // thread samples taken with a ptrace stop
	ProcOnly     int64 // thread samples with only /proc information
	Exited       bool  // every target exited before the end
	OffCPU       int64 // thread captures left out: not running, and OffCPU was not asked for
	UniqueStacks int   // distinct stacks across threads (Samples are per thread name)
	// Sampler is how running threads were sampled: "perf" (perf events,
	// no stop) or "ptrace" (stopped); SamplerWhy says why not perf, or
	// what perf could not do.
	Sampler, SamplerWhy string
	Perf                int64 // of NoStop, the samples of running threads taken from perf events
	PerfHeld            int64 // of those, a runnable thread's previous sample: it waited for a CPU
	PerfLost            int64 // perf samples the kernel dropped (a ring was full)
	CaughtUp            int64 // of Ticks, instants a late tick stood for (perf events kept sampling meanwhile)
	PerfNone            int64 // running threads left out: no perf sample yet (just started, or no event)
}

// ProfileFormats lists what record can write, and the -o extensions that
// select each.
var ProfileFormats = map[string][]string{
	"pprof":  {".pb.gz", ".pprof", ".pb"},
	"folded": {".folded", ".collapsed", ".stacks"},
	"svg":    {".svg"},
	"json":   {".json"},
	"text":   {".txt", ".text"},
}
