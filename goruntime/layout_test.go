package goruntime_test

import (
	"strings"
	"testing"

	"stackshot/goruntime"
	"stackshot/goruntime/internal/layoutgen"
	"stackshot/internal/testutil"
)

// TestLayoutTable regenerates the table entry of every toolchain on this
// machine (a probe built with it, offsets from its DWARF, words from its
// runtime sources) and compares it with the committed table.
func TestLayoutTable(t *testing.T) {
	have, missing := testutil.GoToolchains()
	for _, m := range missing {
		t.Run(strings.Fields(m)[0], func(t *testing.T) { testutil.Skip(t, m+" is not available on this machine") })
	}
	for _, tc := range have {
		t.Run(tc.Name, func(t *testing.T) {
			v, probed, err := layoutgen.Probe(layoutgen.Toolchain{Go: tc.Go, Env: tc.Env})
			if err != nil {
				t.Fatal(err)
			}
			known, ok := goruntime.KnownLayout(v)
			if !ok {
				t.Fatalf("%s is not in the table: run go generate ./goruntime", v)
			}
			if got, want := layoutgen.Entry(probed), layoutgen.Entry(known); got != want {
				t.Errorf("the table's %s entry differs from the probe's (run go generate ./goruntime):\nprobe:\n%s\ntable:\n%s", v, got, want)
			}
		})
	}
}

func TestRelease(t *testing.T) {
	for v, want := range map[string]string{"go1.26.8": "go1.26", "go1.27rc1": "go1.27", "go1.19": "go1.19",
		"devel go1.27-abc": "", "go2": "", "go1.": ""} {
		if got := goruntime.Release(v); got != want {
			t.Errorf("Release(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestUnknownVersion(t *testing.T) {
	if _, ok := goruntime.KnownLayout("go1.18.10"); ok {
		t.Fatal("go1.18 is in the table")
	}
	err := (&goruntime.UnknownVersionError{Version: "go1.18.10"}).Error()
	if !strings.Contains(err, "go1.18.10") || !strings.Contains(err, "go1.26") {
		t.Errorf("error %q names neither the version nor the known ones", err)
	}
}
