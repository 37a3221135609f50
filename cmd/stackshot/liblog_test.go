//go:build linux

package main

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// lyingServer answers every request on every connection with a redirect
// whose Content-Length (0) is a lie: another whole response follows it in
// the same write. Go's HTTP client takes the first, puts the connection
// back as idle, finds the second waiting there, logs "Unsolicited response
// received on idle HTTP channel" through the standard log package, and
// closes the connection. The redirect goes to a second server that answers
// 404 only once every connection of the first was closed by the client: by
// then the client has logged, and it is still running.
func lyingServer(t *testing.T) string {
	t.Helper()
	var mu sync.Mutex
	open := 0
	closed := sync.NewCond(&mu)
	second := serveRaw(t, func(c net.Conn, req string) bool {
		mu.Lock()
		deadline := time.Now().Add(30 * time.Second)
		for open > 0 && time.Now().Before(deadline) {
			go func() { time.Sleep(100 * time.Millisecond); closed.Broadcast() }() // (a bound, not a timing)
			closed.Wait()
		}
		mu.Unlock()
		fmt.Fprint(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return false
	}, nil)
	redirect := "HTTP/1.1 302 Found\r\nLocation: " + second + "/nowhere\r\nContent-Length: 0\r\n\r\n"
	return serveRaw(t, func(c net.Conn, req string) bool {
		fmt.Fprint(c, redirect+redirect) // (one write: the second is unasked for)
		return true
	}, func(opened bool) {
		mu.Lock()
		if opened {
			open++
		} else {
			open--
			closed.Broadcast()
		}
		mu.Unlock()
	})
}

// serveRaw serves HTTP/1.1 by hand on 127.0.0.1: answer writes the answer
// to each request (its request line) and says whether to read another on
// the connection; conns (nil: none) hears of each connection opened and
// closed. It stops when the test ends.
func serveRaw(t *testing.T, answer func(c net.Conn, req string) bool, conns func(opened bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if conns != nil {
				conns(true)
			}
			go func() {
				defer func() {
					c.Close()
					if conns != nil {
						conns(false)
					}
				}()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					for { // the headers (a GET has no body)
						h, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if h == "\r\n" {
							break
						}
					}
					if !answer(c, strings.TrimSpace(line)) {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// A debuginfod server that lies about its answers' length: stderr holds
// stackshot's own one-line messages only, Go's HTTP client's complaint
// among them as a warning (never its logger's raw, dated line); with -q,
// nothing.
func TestDebuginfodLyingLengthStderr(t *testing.T) {
	sp := testutil.SplitTarget(t, "blocked", false)
	tg := testutil.Start(t, sp.Exe)
	url := lyingServer(t)
	cache := filepath.Join(t.TempDir(), "cache")
	_, errOut := dumpEnv(t, debugEnv(cache, url), "-s", fmt.Sprint(tg.PID))
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	found := false
	for _, l := range lines {
		if !strings.HasPrefix(l, "stackshot: ") {
			t.Errorf("a line on stderr is not stackshot's: %q", l)
		}
		found = found || strings.HasPrefix(l, "stackshot: warning: a library said: Unsolicited response received on idle HTTP channel starting with ")
	}
	if !found {
		t.Errorf("stderr lacks the HTTP client's complaint, as a warning:\n%s", errOut)
	}
	// -q: nothing at all.
	if _, errOut := dumpEnv(t, debugEnv(cache, lyingServer(t)), "-q", "-s", fmt.Sprint(tg.PID)); errOut != "" {
		t.Errorf("-q: stderr %q", errOut)
	}
	if files := testutil.CacheFiles(t, cache); len(files) != 0 {
		t.Errorf("cache holds %v", files)
	}
	assertUntouched(t, tg.PID, false)
}
