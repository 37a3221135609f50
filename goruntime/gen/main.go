// Command gen regenerates goruntime/layouts.go: for each toolchain given
// (a go command, optionally prefixed by environment as GOTOOLCHAIN=go1.27.3:go),
// it builds a probe, reads the runtime's layout from the probe's DWARF and
// the status and wait-reason words from the toolchain's runtime sources.
//
//	go run ./goruntime/gen -o goruntime/layouts.go /usr/lib/go-1.19/bin/go go GOTOOLCHAIN=go1.27.3:go
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"stackshot/goruntime"
	"stackshot/goruntime/internal/layoutgen"
)

func main() {
	out := flag.String("o", "layouts.go", "file to write")
	flag.Parse()
	var ls []*goruntime.Layout
	for _, arg := range flag.Args() {
		tc := layoutgen.Toolchain{Go: arg}
		if i := strings.LastIndexByte(arg, ':'); i >= 0 {
			tc.Go = arg[i+1:]
			tc.Env = strings.Split(arg[:i], ",")
		}
		v, l, err := layoutgen.Probe(tc)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gen: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "gen: %s (%s)\n", v, arg)
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		fmt.Fprintln(os.Stderr, "usage: gen [-o FILE] GO...")
		os.Exit(2)
	}
	if err := os.WriteFile(*out, layoutgen.Render(ls), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}
