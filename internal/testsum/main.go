// Command testsum reads `go test -json` on stdin, prints the test output as
// `go test` would, and ends with the list of skipped tests and their
// reasons, so a skip is never silent. Its exit status is 1 when a test
// failed or the stream ended without a result.
//
// Used by `make test`; not part of stackshot.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	reasons := map[string]string{} // pkg/test -> last output line before its skip
	last := map[string]string{}
	var skipped []string
	failed, passed := 0, 0
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			fmt.Fprintln(out, in.Text()) // not JSON: a build error, say
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			out.WriteString(e.Output)
			if e.Test != "" {
				if s := strings.TrimSpace(e.Output); s != "" && !strings.HasPrefix(s, "---") && !strings.HasPrefix(s, "===") {
					last[key] = s
				}
			}
			out.Flush()
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, key)
				reasons[key] = last[key]
			}
		case "fail":
			if e.Test != "" {
				failed++
			} else if e.Package != "" {
				failed++
			}
		case "pass":
			if e.Test != "" {
				passed++
			}
		}
	}
	sort.Strings(skipped)
	if len(skipped) > 0 {
		fmt.Fprintf(out, "\nSkipped tests (%d):\n", len(skipped))
		for _, k := range skipped {
			fmt.Fprintf(out, "  %s: %s\n", k, reasons[k])
		}
	}
	fmt.Fprintf(out, "\n%d passed, %d failed, %d skipped\n", passed, failed, len(skipped))
	if failed > 0 {
		out.Flush()
		os.Exit(1)
	}
}
