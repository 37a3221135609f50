// Command testsum reads `go test -json` on stdin, prints what plain `go
// test` would (each failing test's output, each package's result line),
// and ends with the list of skipped tests and their reasons, so a skip is
// never silent. Its exit status is 1 when a test
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
	reasons := map[string]string{} // pkg test -> the skip's reason
	held := map[string][]string{}  // pkg test -> its output, shown if it fails
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
			if e.Test == "" {
				if strings.TrimSpace(e.Output) == "PASS" {
					continue // the test binary's own -v line
				}
				out.WriteString(e.Output) // the package's result line
				out.Flush()
				continue
			}
			if s := strings.TrimSpace(e.Output); strings.HasPrefix(s, "=== ") {
				continue
			}
			held[key] = append(held[key], e.Output)
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, key)
				reasons[key] = skipReason(held[key])
			}
			delete(held, key)
		case "fail":
			for _, l := range held[key] {
				out.WriteString(l)
			}
			out.Flush()
			delete(held, key)
			failed++
		case "pass":
			if e.Test != "" {
				passed++
			}
			delete(held, key)
		}
	}
	sort.Strings(skipped)
	if len(skipped) > 0 {
		fmt.Fprintf(out, "\nSkipped tests (%d):\n", len(skipped))
		for _, k := range skipped {
			fmt.Fprintf(out, "  %s: %s\n", k, reasons[k])
		}
	}
	fmt.Fprintf(out, "\ntests: %d passed, %d failed, %d skipped\n", passed, failed, len(skipped))
	if failed > 0 {
		out.Flush()
		os.Exit(1)
	}
}

// skipReason is the last line a test logged before it skipped, without
// the file:line prefix.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		s := strings.TrimSpace(lines[i])
		if s == "" || strings.HasPrefix(s, "--- ") {
			continue
		}
		if _, rest, ok := strings.Cut(s, ": "); ok && strings.Contains(s[:len(s)-len(rest)], ".go:") {
			return rest
		}
		return s
	}
	return "(no reason given)"
}
