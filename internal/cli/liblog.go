package cli

import (
	"io"
	"log"
	"strings"
	"sync"
)

// RouteLibraryLog sends what a library writes through Go's standard log
// package to stackshot's own warnings, one escaped line each (Say), at most
// maxLibraryLines of them, each cut at maxLibraryLine bytes; quiet:
// nowhere. stderr is one-line messages of stackshot's: the library that
// logs is Go's net/http, which says "Unsolicited response received on idle
// HTTP channel" (with the bytes a server sent) when a debuginfod server or
// an OTLP collector sends more than its Content-Length said. No transport
// or client has a logger of its own to set; nothing of stackshot's logs
// through the package.
func RouteLibraryLog(quiet bool) {
	log.SetFlags(0)
	log.SetPrefix("")
	if quiet {
		log.SetOutput(io.Discard)
		return
	}
	log.SetOutput(&libraryLog{say: Say})
}

const (
	maxLibraryLines = 5
	maxLibraryLine  = 200
)

// libraryLog is the standard logger's output: each Write is one message.
type libraryLog struct {
	mu   sync.Mutex
	n    int
	say  func(string)
	seen map[string]bool
}

func (l *libraryLog) Write(p []byte) (int, error) {
	msg := strings.Join(strings.Fields(string(p)), " ")
	if len(msg) > maxLibraryLine {
		msg = strings.ToValidUTF8(msg[:maxLibraryLine], "") + "..."
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= maxLibraryLines || l.seen[msg] {
		return len(p), nil
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[msg] = true
	l.n++
	l.say("warning: a library said: " + msg)
	return len(p), nil
}
