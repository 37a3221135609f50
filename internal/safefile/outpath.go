//go:build linux

package safefile

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Expand replaces, in an output path, %p (pids, joined by +), %t (start as
// a UTC timestamp) and %h (the hostname).
func Expand(path string, pids []int, start time.Time) string {
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

// Output writes data whole: to stdout when path is "" or "-", else to the
// file path, of mode m, through WriteFile (nothing half-written is ever
// seen).
func Output(path string, data []byte, m Mode) error {
	if path == "" || path == "-" {
		_, err := os.Stdout.Write(data)
		return err
	}
	return WriteFile(path, data, m)
}

// OutputName names where Output writes path, for a message: "stdout" or
// the path.
func OutputName(path string) string {
	if path == "" || path == "-" {
		return "stdout"
	}
	return path
}
