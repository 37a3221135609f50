//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"stackshot/internal/safefile"
)

// expandOutput replaces %p (pids), %t (UTC timestamp) and %h (hostname).
func expandOutput(path string, pids []int, start time.Time) string {
	if !strings.Contains(path, "%") {
		return path
	}
	var ps []string
	for _, p := range pids {
		ps = append(ps, strconv.Itoa(p))
	}
	host, _ := os.Hostname()
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] != '%' || i+1 == len(path) {
			b.WriteByte(path[i])
			continue
		}
		i++
		switch path[i] {
		case 'p':
			b.WriteString(strings.Join(ps, "+"))
		case 't':
			b.WriteString(start.UTC().Format("20060102T150405Z"))
		case 'h':
			b.WriteString(host)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(path[i])
		}
	}
	return b.String()
}

// checkWritable makes sure path could be written (the checks of
// safefile.Create, and a temporary file created beside it and removed)
// before a long recording starts.
func checkWritable(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usageErr("cannot write to "+path, "it is a directory", "give a file name, e.g. -o "+filepath.Join(path, "stacks.txt"))
	}
	return safefile.Check(path)
}
