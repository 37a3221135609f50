package output

import "stackshot/report"

// jsonGo is the Go part of a process's JSON: its runtime and goroutines
// (CLI.md, "Go programs"). Every field is omitted for other processes;
// "goroutines" is null when they could not be read.
type jsonGo struct {
	Runtime         *jsonRuntime         `json:"runtime,omitempty"`
	Runtimes        []jsonRuntime        `json:"runtimes,omitempty"` // several: each
	Goroutines      *[]jsonGoroutine     `json:"goroutines,omitempty"`
	Skipped         int                  `json:"goroutines_skipped,omitempty"`
	GoroutineGroups []jsonGoroutineGroup `json:"goroutine_groups,omitempty"`
}

type jsonRuntime struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type jsonGoroutine struct {
	GoID       uint64         `json:"goid"`
	Status     string         `json:"status"`
	WaitReason *string        `json:"wait_reason"`
	WaitingS   *float64       `json:"waiting_s"`
	TID        *int           `json:"tid"`
	Frames     []jsonFrame    `json:"frames"`
	CreatedBy  *jsonCreatedBy `json:"created_by"`
	Error      *string        `json:"error,omitempty"`
}

type jsonCreatedBy struct {
	Function string  `json:"function"`
	GoID     *uint64 `json:"goid"`
	File     string  `json:"file,omitempty"`
	Line     int     `json:"line,omitempty"`
}

type jsonGoroutineGroup struct {
	Count     int            `json:"count"`
	GoIDs     []uint64       `json:"goids"`
	Status    string         `json:"status,omitempty"`
	Frames    []jsonFrame    `json:"frames"`
	CreatedBy *jsonCreatedBy `json:"created_by"`
}

func goJSON(p *report.Process) jsonGo {
	var out jsonGo
	if p.Runtime == nil {
		return out
	}
	out.Runtime = &jsonRuntime{Name: p.Runtime.Name, Version: p.Runtime.Version}
	for _, r := range p.Runtimes {
		out.Runtimes = append(out.Runtimes, jsonRuntime{Name: r.Name, Version: r.Version})
	}
	if p.Runtime.Name != "go" {
		return out // (goroutines are Go's)
	}
	gs := []jsonGoroutine(nil)
	if p.Goroutines != nil {
		gs = make([]jsonGoroutine, 0, len(p.Goroutines))
	}
	for i := range p.Goroutines {
		g := &p.Goroutines[i]
		jg := jsonGoroutine{GoID: g.GoID, Status: g.Status, Frames: framesJSON(g.Frames), CreatedBy: createdByJSON(g.CreatedBy)}
		if g.WaitReason != "" {
			r := g.WaitReason
			jg.WaitReason = &r
		}
		if g.HasWaiting {
			s := float64(g.WaitingNS/1e6) / 1e3
			jg.WaitingS = &s
		}
		if g.TID != 0 {
			tid := g.TID
			jg.TID = &tid
		}
		if g.Error != "" {
			e := g.Error
			jg.Error = &e
		}
		gs = append(gs, jg)
	}
	out.Goroutines = &gs
	out.Skipped = p.GoroutinesSkipped
	for i := range p.GoroutineGroups {
		grp := &p.GoroutineGroups[i]
		out.GoroutineGroups = append(out.GoroutineGroups, jsonGoroutineGroup{Count: len(grp.GoIDs), GoIDs: grp.GoIDs,
			Status: grp.Status, Frames: framesJSON(grp.Frames), CreatedBy: createdByJSON(grp.CreatedBy)})
	}
	return out
}

func framesJSON(fr []report.Frame) []jsonFrame {
	out := make([]jsonFrame, 0, len(fr))
	for i := range fr {
		out = append(out, frameJSON(&fr[i]))
	}
	return out
}

func createdByJSON(c *report.CreatedBy) *jsonCreatedBy {
	if c == nil {
		return nil
	}
	out := &jsonCreatedBy{Function: c.Function, File: c.File, Line: c.Line}
	if c.HasGoID {
		id := c.GoID
		out.GoID = &id
	}
	return out
}
