package output

import "stackshot/report"

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
}

// jsonThreadDiag is the diagnosis part of a thread (embedded in
// jsonThread).
type jsonThreadDiag struct {
	WaitingFor *jsonWaitingFor `json:"waiting_for,omitempty"`
	Progress   string          `json:"progress,omitempty"`
	SameStackS *float64        `json:"same_stack_s,omitempty"`
}

type jsonWaitingFor struct {
	Kind     string  `json:"kind"`
	Address  *string `json:"address"`
	OwnerTID *int    `json:"owner_tid"`
	Note     string  `json:"note,omitempty"`
	Class    string  `json:"class,omitempty"` // a Java wait's object
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
			Stuck: s.Stuck, Spinning: s.Spinning, Moving: s.Moving}
	}
	return d
}

func threadDiagJSON(t *report.Thread) jsonThreadDiag {
	var d jsonThreadDiag
	if w := t.WaitingFor; w != nil {
		jw := &jsonWaitingFor{Kind: w.Kind, OwnerTID: w.OwnerTID, Note: w.Note, Class: w.Class}
		if w.Address != 0 {
			a := hex(w.Address)
			jw.Address = &a
		}
		d.WaitingFor = jw
	}
	if t.Progress != "" {
		d.Progress = t.Progress
		s := float64(int64(t.SameStackS*10+0.5)) / 10
		d.SameStackS = &s
	}
	return d
}
