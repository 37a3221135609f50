package output

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// WriteProfileText writes a human summary of p: a header (duration, samples,
// achieved rate, threads, truncation, pauses), the top stacks with counts
// and percentages, and the top functions by self samples (where the thread
// was) and by total samples (on the stack at all, counted once per stack
// even under recursion). top <= 0 means 10. Functions are named as in
// folded stacks; percentages are of all samples.
func WriteProfileText(w io.Writer, p *Profile, top int) error {
	if top <= 0 {
		top = 10
	}
	bw := bufio.NewWriter(w)
	var total int64
	for i := range p.Samples {
		if p.Samples[i].Count > 0 {
			total += p.Samples[i].Count
		}
	}
	textProfileHeader(bw, p, total)
	textTopStacks(bw, p, total, top)
	textTopFunctions(bw, p, total, top)
	return bw.Flush()
}

func pct(n, total int64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}

func textProfileHeader(w *bufio.Writer, p *Profile, total int64) {
	st := &p.Stats
	fmt.Fprintf(w, "Profile: %s", p.Duration.Round(time.Millisecond))
	if !p.Start.IsZero() {
		fmt.Fprintf(w, " from %s", p.Start.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, ", %d Hz requested, %.1f Hz achieved (%d ticks)\n", p.FreqHz, st.AchievedHz, st.Ticks)
	fmt.Fprintf(w, "Samples: %d thread stacks from %d thread%s in %d process%s (%s)\n",
		total, st.Threads, plural(st.Threads), len(p.Processes), pluralES(len(p.Processes)), clockText(p))
	for _, pr := range p.Processes {
		exe := pr.Exe
		if exe == "" {
			exe = "?"
		}
		fmt.Fprintf(w, "  %d %s (%s)\n", pr.PID, cleanText(pr.Comm, false), cleanText(exe, false))
	}
	if st.Truncated > 0 {
		fmt.Fprintf(w, "Truncated stacks: %d (%.1f%%): %s\n", st.Truncated, pct(st.Truncated, total), reasonList(st.TruncatedWhy))
	}
	if st.Stopped+st.NoStop+st.ProcOnly > 0 {
		fmt.Fprintf(w, "Capture: %d without stopping, %d stopped, %d from /proc only\n", st.NoStop, st.Stopped, st.ProcOnly)
	}
	if st.PauseMaxUS > 0 {
		fmt.Fprintf(w, "Per-thread pause: median %.1fus, p99 %.1fus, max %.1fus\n", st.PauseMedUS, st.PauseP99US, st.PauseMaxUS)
	}
	if st.Exited {
		fmt.Fprintf(w, "Every target exited before the end.\n")
	}
}

func pluralES(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}

// textStack is a unique (process, thread, stack) with its count.
type textStack struct {
	s     *Sample
	names []string // innermost first
	count int64
}

func textTopStacks(w *bufio.Writer, p *Profile, total int64, top int) {
	comms := map[int]string{}
	for _, pr := range p.Processes {
		comms[pr.PID] = cleanText(pr.Comm, false)
	}
	byKey := map[string]int{}
	var stacks []textStack
	for i := range p.Samples {
		s := &p.Samples[i]
		if s.Count <= 0 {
			continue
		}
		names := make([]string, len(s.Frames))
		for j := range s.Frames {
			names[j], _ = frameName(&s.Frames[j])
		}
		key := fmt.Sprintf("%d\x00%s\x00%s", s.PID, s.Thread, strings.Join(names, "\x00"))
		if k, ok := byKey[key]; ok {
			stacks[k].count += s.Count
			continue
		}
		byKey[key] = len(stacks)
		stacks = append(stacks, textStack{s: s, names: names, count: s.Count})
	}
	sort.SliceStable(stacks, func(i, j int) bool { return stacks[i].count > stacks[j].count })
	n := min(top, len(stacks))
	fmt.Fprintf(w, "\nTop %d stack%s of %d:\n", n, plural(n), len(stacks))
	for _, st := range stacks[:n] {
		s := st.s
		comm := comms[s.PID]
		if comm == "" {
			comm = "?"
		}
		fmt.Fprintf(w, "\n%8d %6.2f%%  %s (pid %d) thread %q (tid %d)\n",
			st.count, pct(st.count, total), comm, s.PID, s.Thread, s.TID)
		if len(st.names) == 0 {
			fmt.Fprintf(w, "                   (no frames)\n")
		}
		for _, name := range st.names {
			fmt.Fprintf(w, "                   %s\n", name)
		}
	}
}

type funcCount struct {
	name        string
	self, total int64
}

func textTopFunctions(w *bufio.Writer, p *Profile, total int64, top int) {
	byName := map[string]*funcCount{}
	get := func(name string) *funcCount {
		fc := byName[name]
		if fc == nil {
			fc = &funcCount{name: name}
			byName[name] = fc
		}
		return fc
	}
	seen := map[string]bool{}
	for i := range p.Samples {
		s := &p.Samples[i]
		if s.Count <= 0 || len(s.Frames) == 0 {
			continue
		}
		clear(seen)
		for j := range s.Frames {
			name, _ := frameName(&s.Frames[j])
			fc := get(name)
			if j == 0 {
				fc.self += s.Count
			}
			if !seen[name] {
				seen[name] = true
				fc.total += s.Count
			}
		}
	}
	funcs := make([]*funcCount, 0, len(byName))
	for _, fc := range byName {
		funcs = append(funcs, fc)
	}
	list := func(title string, key func(*funcCount) int64) {
		sort.Slice(funcs, func(i, j int) bool {
			a, b := key(funcs[i]), key(funcs[j])
			if a != b {
				return a > b
			}
			return funcs[i].name < funcs[j].name
		})
		n := 0
		for n < len(funcs) && n < top && key(funcs[n]) > 0 {
			n++
		}
		fmt.Fprintf(w, "\nTop %d function%s by %s samples:\n", n, plural(n), title)
		fmt.Fprintf(w, "%8s %7s %8s %7s  %s\n", "self", "self%", "total", "total%", "function")
		for _, fc := range funcs[:n] {
			fmt.Fprintf(w, "%8d %6.2f%% %8d %6.2f%%  %s\n", fc.self, pct(fc.self, total), fc.total, pct(fc.total, total), fc.name)
		}
	}
	list("self", func(fc *funcCount) int64 { return fc.self })
	list("total", func(fc *funcCount) int64 { return fc.total })
}

func clockText(p *Profile) string {
	if p.OffCPU {
		return "wall clock: every thread at every tick, running or not"
	}
	return "on-CPU: running threads only"
}

// Summary is what record's summary says besides the profile's own
// figures.
type Summary struct {
	End     string // how the recording ended ("completed", "interrupted", ...)
	Went    string // where the profile went: "written to FILE", "sent to URL"
	Verbose bool   // -v: how it sampled, and what it left out
	Quiet   bool   // -q: only the warning of an empty profile
}

// WriteSummary writes what record says on stderr at its end: one line
// (how it ended, what it sampled, where the profile went); with -v, how
// it sampled and what it left out. An empty on-CPU profile is a warning
// even with -q: nothing ran on a CPU, and --idle is what shows a process
// that waits.
func WriteSummary(w io.Writer, p *Profile, s Summary) {
	st := &p.Stats
	if st.Samples == 0 && !p.OffCPU {
		fmt.Fprintf(w, "stackshot: warning: nothing ran on a CPU in %s: the profile is empty (record samples running threads only; --idle samples the threads that wait, as an idle or hung process's do)\n",
			p.Duration.Round(time.Millisecond))
	}
	if s.Quiet {
		return
	}
	what := "on-CPU samples"
	if p.OffCPU {
		what = "samples (on and off CPU)"
	}
	how := map[string]string{"perf": " (perf events)", "ptrace": " (ptrace stops)"}[st.Sampler]
	fmt.Fprintf(w, "stackshot: %s after %s: %d ticks (%.1f Hz of %d), %d %s of %d threads%s, %d unique stacks, %s\n",
		s.End, p.Duration.Round(time.Millisecond), st.Ticks, st.AchievedHz, p.FreqHz, st.Samples, what, st.Threads, how, st.UniqueStacks, s.Went)
	if s.Verbose {
		writeSampling(w, p)
	}
}

// writeSampling says how record sampled, and what it left out (-v).
func writeSampling(w io.Writer, p *Profile) {
	st := &p.Stats
	if !p.OffCPU && st.OffCPU > 0 {
		fmt.Fprintf(w, "stackshot: %d captures of threads not running left out (--idle keeps them)\n", st.OffCPU)
	}
	switch {
	case st.Sampler == "perf":
		fmt.Fprintf(w, "stackshot: sampled with perf events: %d samples of running threads (%d of them a runnable thread's latest, as it waited for a CPU), %d dropped by the kernel; %d of the ticks were late and stood for the instants they missed\n",
			st.Perf, st.PerfHeld, st.PerfLost, st.CaughtUp)
		if st.PerfNone > 0 {
			fmt.Fprintf(w, "stackshot: %d captures of running threads left out: no perf sample of them (just started, or no event)\n", st.PerfNone)
		}
		if st.SamplerWhy != "" {
			fmt.Fprintf(w, "stackshot: perf events: %s\n", st.SamplerWhy)
		}
	case st.Sampler != "" && st.SamplerWhy != "":
		fmt.Fprintf(w, "stackshot: sampled with ptrace stops (%s)\n", st.SamplerWhy)
	case st.Sampler != "":
		fmt.Fprintf(w, "stackshot: sampled with ptrace stops\n")
	}
	fmt.Fprintf(w, "stackshot: samples read: %d without a stop, %d stopped (pause median %.0fus, p99 %.0fus, max %.0fus), %d from /proc only\n",
		st.NoStop, st.Stopped, st.PauseMedUS, st.PauseP99US, st.PauseMaxUS, st.ProcOnly)
	if st.Truncated > 0 {
		fmt.Fprintf(w, "stackshot: %d stacks truncated (%s)\n", st.Truncated, reasonList(st.TruncatedWhy))
	}
}
