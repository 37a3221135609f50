//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"stackshot/output"
	"stackshot/procmaps"
	"stackshot/ptrace"
	"stackshot/resolve"
	"stackshot/unwind"
)

// recTarget is one process being sampled.
type recTarget struct {
	pid      int
	mem      ptrace.MemReader
	last     *ptrace.Process
	space    *resolve.Space
	mapsAt   time.Time
	stale    bool // a PC fell outside the known maps: read them again
	gone     bool
	comm     string
	exe      string
	tidsSeen map[int]bool
}

// aggregator deduplicates stacks: a stack seen before costs a map lookup,
// so memory grows with distinct stacks, not with samples.
type aggregator struct {
	idx     map[string]int
	samples []output.Sample
	key     []byte
}

func (a *aggregator) add(key []byte, make func() output.Sample) {
	if i, ok := a.idx[string(key)]; ok {
		a.samples[i].Count++
		return
	}
	s := make()
	s.Count = 1
	a.idx[string(key)] = len(a.samples)
	a.samples = append(a.samples, s)
}

// pauseHist keeps ptrace pauses in fixed buckets (flat memory over any
// run length): 1 µs wide to 100 µs, 100 µs wide to 10 ms, 10 ms wide to 1 s.
type pauseHist struct {
	b     [100 + 99 + 100]int64
	n     int64
	maxNS int64
}

func (h *pauseHist) add(ns int64) {
	us := ns / 1000
	var i int64
	switch {
	case us < 100:
		i = us
	case us < 10000:
		i = 100 + (us-100)/100
	default:
		i = 199 + (us-10000)/10000
		if i >= int64(len(h.b)) {
			i = int64(len(h.b)) - 1
		}
	}
	h.b[i]++
	h.n++
	if ns > h.maxNS {
		h.maxNS = ns
	}
}

func bucketUpperUS(i int) float64 {
	switch {
	case i < 100:
		return float64(i + 1)
	case i < 199:
		return float64(100 + (i-100+1)*100)
	default:
		return float64(10000 + (i-199+1)*10000)
	}
}

// quantile returns an upper bound (bucket edge) of the q-quantile in µs.
func (h *pauseHist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	want := int64(q*float64(h.n-1)) + 1
	var acc int64
	for i, c := range h.b {
		acc += c
		if acc >= want {
			v := bucketUpperUS(i)
			if m := float64(h.maxNS) / 1000; v > m {
				v = m
			}
			return v
		}
	}
	return float64(h.maxNS) / 1000
}

func cmdRecord(args []string) error {
	c := newCommon("record")
	ox := addOTLPFlags(c.fs)
	if err := c.parse(args, true); err != nil {
		return err
	}
	if err := ox.prepare(c.quiet); err != nil {
		return err
	}
	if c.freq <= 0 || c.freq > 10000 {
		return usageError{fmt.Sprintf("--freq %d: want 1 to 10000 samples per second", c.freq)}
	}
	if c.duration <= 0 {
		return usageError{"--duration must be positive"}
	}
	format, err := output.FormatFor(c.output, c.format)
	if err != nil {
		return usageError{err.Error()}
	}
	// Fail now, not after the whole recording, if -o cannot be written.
	if err := checkWritable(expandOutput(c.output, c.pids, time.Now())); err != nil {
		return err
	}
	s := newSession(c)
	stop := s.catchSignals()
	defer stop()

	var targets []*recTarget
	for _, pid := range c.pids {
		p, err := s.capture(pid, time.Now().Add(c.timeout))
		if err != nil {
			return err // the message explains; exit 1
		}
		t := &recTarget{pid: pid, mem: ptrace.MemReader{PID: p.MemPID()}, last: p, comm: p.Comm, exe: p.Exe,
			mapsAt: time.Now(), tidsSeen: map[int]bool{}}
		t.space = s.res.Space(p, t.mem)
		// Symbolize the first capture before the clock starts: loading
		// CFI, symbols and debug info is a one-time cost that would
		// otherwise eat the first ticks.
		s.res.Process(p, t.mem)
		targets = append(targets, t)
	}
	mode, _ := c.captureMode()
	cache := procmaps.NewTaskCache()
	defer cache.Close()
	agg := &aggregator{idx: map[string]int{}}
	var (
		hist     pauseHist
		stats    = output.Stats{TruncatedWhy: map[string]int64{}}
		frames   []unwind.Frame
		progress = !c.quiet && isTerminal(2)
		lastShow time.Time
	)
	period := time.Second / time.Duration(c.freq)
	start := time.Now()
	end := start.Add(c.duration)
	timer := time.NewTimer(0)
	<-timer.C
	interrupted := false
	allGone := false
loop:
	for n := int64(0); ; n++ {
		due := start.Add(time.Duration(n) * period)
		if !due.Before(end) {
			break
		}
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-s.cancel:
				interrupted = true
				break loop
			}
		} else if -d > period {
			// Late by more than a period: skip to the current slot rather
			// than bunching samples (the schedule never drifts).
			n = int64(time.Since(start) / period)
			continue
		}
		if s.interrupted() {
			interrupted = true
			break
		}
		stats.Ticks++
		live := 0
		for _, t := range targets {
			if t.gone {
				continue
			}
			opt := s.captureOptions(time.Now().Add(c.timeout))
			opt.Mode = mode
			opt.Reuse = t.last
			opt.Cache = cache
			opt.RefreshMaps = t.stale || time.Since(t.mapsAt) > time.Second
			if opt.RefreshMaps {
				t.mapsAt, t.stale = time.Now(), false
			}
			t.space.Update(t.last)
			check := func(p *ptrace.Process, th *ptrace.Thread) bool {
				if p.BuildIDs == nil {
					resolve.CollectImages(p, t.mem)
				}
				t.space.Update(p)
				return t.space.CheckNoStop(th)
			}
			p, err := ptrace.Capture(t.pid, opt, check)
			if err != nil || ((p.State == "Z" || p.State == "X") && p.MemTID == 0) || len(p.Threads) == 0 {
				t.gone = true
				if !c.quiet {
					fmt.Fprintf(os.Stderr, "%sstackshot: process %d exited after %s\n", clearLine(progress), t.pid, time.Since(start).Round(time.Millisecond))
				}
				continue
			}
			live++
			if p.BuildIDs == nil {
				resolve.CollectImages(p, t.mem)
			}
			t.last = p
			t.space.Update(p)
			for i := range p.Threads {
				th := &p.Threads[i]
				if th.Kernel {
					continue
				}
				t.tidsSeen[th.TID] = true
				switch th.Method {
				case ptrace.MethodPtrace:
					stats.Stopped++
					hist.add(th.PauseNS)
				case ptrace.MethodNoStop:
					stats.NoStop++
				default:
					stats.ProcOnly++
				}
				fr, why, ok := t.space.Unwind(th, frames[:0])
				frames = fr
				if ok && !why.Complete() {
					stats.Truncated++
					stats.TruncatedWhy[why.String()]++
				} else if !ok {
					stats.Truncated++
					stats.TruncatedWhy["no registers"]++
				}
				for _, f := range fr {
					if t.space.Missing(f.PC) {
						t.stale = true
					}
				}
				key := stackKey(agg.key[:0], t.pid, th, fr, c.kernel)
				agg.key = key
				stats.Samples++
				agg.add(key, func() output.Sample {
					return output.Sample{PID: t.pid, TID: th.TID, Thread: th.Name,
						Frames: s.res.Frames(t.space, th, fr, ok, nil)}
				})
			}
		}
		if live == 0 {
			allGone = true
			break
		}
		if progress && time.Since(lastShow) > 250*time.Millisecond {
			lastShow = time.Now()
			el := time.Since(start)
			fmt.Fprintf(os.Stderr, "\rrecording %s/%s: %d samples, %.1f Hz, %d threads   ",
				el.Round(100*time.Millisecond), c.duration, stats.Samples, float64(stats.Ticks)/el.Seconds(), threadCount(targets))
		}
	}
	elapsed := time.Since(start)
	if elapsed > c.duration {
		elapsed = c.duration
	}
	if progress {
		fmt.Fprint(os.Stderr, clearLine(true))
	}
	stats.AchievedHz = float64(stats.Ticks) / elapsed.Seconds()
	stats.Threads = threadCount(targets)
	stats.PauseMedUS = hist.quantile(0.5)
	stats.PauseP99US = hist.quantile(0.99)
	stats.PauseMaxUS = float64(hist.maxNS) / 1000
	stats.Exited = allGone
	prof := &output.Profile{Start: start, Duration: elapsed, FreqHz: c.freq, PerThread: c.perThread,
		Samples: agg.samples, Stats: stats}
	for _, t := range targets {
		prof.Processes = append(prof.Processes, output.ProfileProcess{PID: t.pid, Comm: t.comm, Exe: t.exe})
	}
	path := expandOutput(c.output, c.pids, start)
	if !ox.enabled() || c.output != "" { // --otlp alone writes no stdout
		var buf bytes.Buffer
		if err := output.WriteProfile(&buf, prof, format, 20); err != nil {
			return err
		}
		if err := writeOutput(path, buf.Bytes()); err != nil {
			return err
		}
	}
	if !c.quiet {
		printRecordSummary(prof, interrupted, ox.where(path))
	}
	return ox.deliver(prof, c.timeout, c.quiet, c.verbose)
}

func clearLine(progress bool) string {
	if progress {
		return "\r\033[K"
	}
	return ""
}

func threadCount(ts []*recTarget) int {
	n := 0
	for _, t := range ts {
		n += len(t.tidsSeen)
	}
	return n
}

// stackKey identifies a thread's stack for deduplication: pid, thread name,
// kernel frames (by name) and user PCs.
func stackKey(b []byte, pid int, th *ptrace.Thread, fr []unwind.Frame, kernel bool) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(pid))
	b = append(b, th.Name...)
	b = append(b, 0)
	if kernel {
		for _, k := range th.KernelStack {
			b = append(b, k.Function...)
			b = binary.LittleEndian.AppendUint64(b, k.Offset^k.Addr)
			b = append(b, 0)
		}
	}
	b = append(b, 1)
	if len(fr) == 0 && th.Syscall != nil {
		b = binary.LittleEndian.AppendUint64(b, th.Syscall.PC)
	}
	for _, f := range fr {
		pc := f.PC
		if f.Exact {
			pc |= 1 << 63
		}
		b = binary.LittleEndian.AppendUint64(b, pc)
	}
	return b
}

func printRecordSummary(p *output.Profile, interrupted bool, path string) {
	st := p.Stats
	how := "done"
	switch {
	case interrupted:
		how = "interrupted"
	case st.Exited:
		how = "every target exited"
	}
	where := "stdout"
	if path != "" && path != "-" {
		where = path
	}
	fmt.Fprintf(os.Stderr, "stackshot: %s after %s: %d ticks (%.1f Hz of %d), %d thread samples of %d threads, %d unique stacks, written to %s\n",
		how, p.Duration.Round(time.Millisecond), st.Ticks, st.AchievedHz, p.FreqHz, st.Samples, st.Threads, len(p.Samples), where)
	fmt.Fprintf(os.Stderr, "stackshot: captures: %d without a stop, %d stopped (pause median %.0fus, p99 %.0fus, max %.0fus), %d from /proc only\n",
		st.NoStop, st.Stopped, st.PauseMedUS, st.PauseP99US, st.PauseMaxUS, st.ProcOnly)
	if st.Truncated > 0 {
		var why []string
		for k, v := range st.TruncatedWhy {
			why = append(why, fmt.Sprintf("%s: %d", k, v))
		}
		sort.Strings(why)
		fmt.Fprintf(os.Stderr, "stackshot: %d stacks truncated (%s)\n", st.Truncated, strings.Join(why, ", "))
	}
}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
