package output

import (
	"math"

	"stackshot/report"
)

// jsonProcessDiag is the diagnosis part of a process (embedded in
// jsonProcess): deadlocks (present, maybe empty, when diagnosis ran),
// groups (with grouping on), the progress summary and the verdict.
type jsonProcessDiag struct {
	Verdict         string               `json:"verdict,omitempty"`
	Deadlocks       *[]jsonDeadlock      `json:"deadlocks,omitempty"`
	Groups          []jsonGroup          `json:"groups,omitempty"`
	ProgressSummary *jsonProgressSummary `json:"progress_summary,omitempty"`
}

type jsonDeadlock struct {
	TIDs      []int     `json:"tids"`
	Addresses []*string `json:"addresses"` // null: unknown
}

type jsonGroup struct {
	Count  int         `json:"count"`
	TIDs   []int       `json:"tids"`
	Names  []string    `json:"names"`
	Frames []jsonFrame `json:"frames"`
}

type jsonProgressSummary struct {
	Snapshots int     `json:"snapshots"`
	IntervalS float64 `json:"interval_s"`
	Stuck     int     `json:"stuck"`
	Spinning  int     `json:"spinning"`
	Moving    int     `json:"moving"`
	Waiting   int     `json:"waiting"`
}

// jsonThreadDiag is the diagnosis part of a thread (embedded in
// jsonThread).
type jsonThreadDiag struct {
	WaitingFor *jsonWaitingFor `json:"waiting_for,omitempty"`
	Progress   string          `json:"progress,omitempty"`
	SameStackS *float64        `json:"same_stack_s,omitempty"`
	// What a thread blocked on descriptors waits on.
	FD           *jsonFD  `json:"fd,omitempty"`
	WatchedFDs   []jsonFD `json:"watched_fds,omitempty"`
	WatchedCount *int     `json:"watched_count,omitempty"`
	// Its share of a CPU (--interval): over all the snapshots, in each
	// interval; how often a waiting thread wakes.
	CPUShare     *float64  `json:"cpu_share,omitempty"`
	CPUShares    []float64 `json:"cpu_shares,omitempty"`
	WakesEveryMS *float64  `json:"wakes_every_ms,omitempty"`
}

type jsonFD struct {
	Num    int    `json:"num"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
}

// jsonOwnerState is what a lock's owner is doing.
type jsonOwnerState struct {
	State      string          `json:"state,omitempty"`
	Syscall    string          `json:"syscall,omitempty"`
	FD         *jsonFD         `json:"fd,omitempty"`
	WaitingFor *jsonWaitingFor `json:"waiting_for,omitempty"`
}

type jsonWaitingFor struct {
	Kind     string  `json:"kind"`
	Address  *string `json:"address"`
	OwnerTID *int    `json:"owner_tid"`
	Note     string  `json:"note,omitempty"`
	// OwnerState: what the owner is doing, when the report shows it.
	OwnerState *jsonOwnerState `json:"owner_state,omitempty"`
	// Additions (2): the lock's symbol; a process-shared lock's owner
	// in another process.
	Symbol    string `json:"symbol,omitempty"`
	OwnerPID  int    `json:"owner_pid,omitempty"`
	OwnerComm string `json:"owner_comm,omitempty"`
	Class     string `json:"class,omitempty"` // a Java wait's object
}

func processDiagJSON(p *report.Process) jsonProcessDiag {
	var d jsonProcessDiag
	if p.Diagnosed || p.ProgressSummary != nil {
		d.Verdict = Verdict(p)
	}
	if p.Diagnosed {
		dl := []jsonDeadlock{}
		for _, c := range p.Deadlocks {
			jd := jsonDeadlock{TIDs: c.TIDs, Addresses: []*string{}}
			for _, a := range c.Addresses {
				var s *string
				if a != 0 {
					h := hex(a)
					s = &h
				}
				jd.Addresses = append(jd.Addresses, s)
			}
			dl = append(dl, jd)
		}
		d.Deadlocks = &dl
	}
	for i := range p.Groups {
		g := &p.Groups[i]
		jg := jsonGroup{Count: g.Count, TIDs: g.TIDs, Names: g.Names, Frames: []jsonFrame{}}
		for j := range g.Frames {
			jg.Frames = append(jg.Frames, frameJSON(&g.Frames[j]))
		}
		d.Groups = append(d.Groups, jg)
	}
	if s := p.ProgressSummary; s != nil {
		d.ProgressSummary = &jsonProgressSummary{Snapshots: s.Snapshots, IntervalS: s.IntervalS,
			Stuck: s.Stuck, Spinning: s.Spinning, Moving: s.Moving, Waiting: s.Waiting}
	}
	return d
}

func threadDiagJSON(t *report.Thread) jsonThreadDiag {
	var d jsonThreadDiag
	d.WaitingFor = waitingForJSON(t.WaitingFor)
	if t.Progress != "" {
		d.Progress = t.Progress
		s := float64(int64(t.SameStackS*10+0.5)) / 10
		d.SameStackS = &s
	}
	if fw := t.FDWait; fw != nil {
		d.FD = fdJSON(fw.FD)
		for i := range fw.Watched {
			d.WatchedFDs = append(d.WatchedFDs, *fdJSON(&fw.Watched[i]))
		}
		if fw.WatchedCount >= 0 {
			n := fw.WatchedCount
			d.WatchedCount = &n
		}
	}
	if len(t.CPUShares) > 0 {
		s := round2(t.CPUShare)
		d.CPUShare = &s
		for _, v := range t.CPUShares {
			d.CPUShares = append(d.CPUShares, round2(v))
		}
	}
	if t.WakeNS > 0 {
		ms := float64(t.WakeNS/1e5) / 10
		d.WakesEveryMS = &ms
	}
	return d
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func fdJSON(f *report.FD) *jsonFD {
	if f == nil {
		return nil
	}
	return &jsonFD{Num: f.Num, Kind: f.Kind, Target: f.Target}
}

func waitingForJSON(w *report.WaitingFor) *jsonWaitingFor {
	if w == nil {
		return nil
	}
	jw := &jsonWaitingFor{Kind: w.Kind, OwnerTID: w.OwnerTID, Note: w.Note, Symbol: w.Symbol,
		OwnerPID: w.OwnerPID, OwnerComm: w.OwnerComm, Class: w.Class}
	if w.Address != 0 {
		a := hex(w.Address)
		jw.Address = &a
	}
	if st := w.OwnerState; st != nil {
		jw.OwnerState = &jsonOwnerState{State: st.State, Syscall: st.Syscall, FD: fdJSON(st.FD),
			WaitingFor: waitingForJSON(st.Waiting)}
	}
	return jw
}
