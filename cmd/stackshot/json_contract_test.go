//go:build linux

package main

import (
	"fmt"
	"regexp"
	"testing"

	"stackshot/internal/testutil"
)

// pause_us is a whole number of microseconds, as the contract shows it.
func TestDumpPauseUSInteger(t *testing.T) {
	tg := testutil.Start(t, buildHot(t))
	out, errOut, code := runSS(t, "dump", "--json", "--mode", "stop", fmt.Sprint(tg.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	all := regexp.MustCompile(`"pause_us": [^,\n]+`).FindAllString(out, -1)
	if len(all) < 2 {
		t.Fatalf("%d pause_us fields in %s", len(all), out)
	}
	for _, f := range all {
		if !regexp.MustCompile(`^"pause_us": \d+$`).MatchString(f) {
			t.Errorf("not an integer: %s", f)
		}
	}
}

// An inlined frame carries the offset of the frame it was inlined into.
func TestDumpInlinedFrameOffset(t *testing.T) {
	bin := testutil.Build(t, "gcc", []string{testutil.Testdata("targets", "inlined.c")}, "-O2", "-g")
	tg := testutil.Start(t, bin)
	p := dumpJSON(t, fmt.Sprint(tg.PID))
	fr := p.Threads[0].Frames
	for i, f := range fr {
		if f.Fn() != "wait_for_input" {
			continue
		}
		if !f.Inlined || i+1 == len(fr) || fr[i+1].Fn() != "main" || fr[i+1].PC != f.PC {
			t.Fatalf("wait_for_input is not an inlined frame followed by main at its pc: %+v", fr)
		}
		if f.Offset == nil || fr[i+1].Offset == nil || *f.Offset != *fr[i+1].Offset {
			t.Errorf("inlined frame offset %v, main's %v: want main's", f.Offset, fr[i+1].Offset)
		}
		return
	}
	t.Fatalf("no wait_for_input frame: %+v", fr)
}
