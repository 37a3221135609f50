package procmaps

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The tables in testdata/net were copied from /proc/PID/net of a process
// that made these sockets and printed, with Python's own socket calls,
// their addresses (getsockname) and inodes (fstat).
func TestNetTable(t *testing.T) {
	want := map[uint64]string{
		110192: "tcp [::1]:55233 (listening)",
		110193: "tcp [::1]:57096 -> [::1]:55233",
		110195: "tcp 127.0.0.1:45455 (listening)", // (a v4-mapped listener)
		110196: "udp 127.0.0.1:41949 -> 127.0.0.1:53",
		110197: "udp 127.0.0.1:37336",
		110199: "unix stream /tmp/tmp2p0vl_z4/a sock",
		110200: "unix dgram @abstract-name",
		1:      "", // asked for, in no table
	}
	got := map[uint64]string{}
	for ino := range want {
		got[ino] = ""
	}
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6", "unix"} {
		f, err := os.Open(filepath.Join("testdata/net", proto))
		if err != nil {
			t.Fatal(err)
		}
		if err := NetTable(f, proto, got); err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		f.Close()
	}
	for ino, w := range want {
		if got[ino] != w {
			t.Errorf("inode %d: %q, want %q", ino, got[ino], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d inodes named, %d asked for: %v", len(got), len(want), got)
	}
}

// A unix socket's path is the binder's choice, newlines included: one
// that forges a line for another socket's inode makes that inode
// ambiguous, never named by the forgery; a path with spaces is kept whole.
func TestNetTableForgedLine(t *testing.T) {
	got := map[uint64]string{110193: "", 110300: ""}
	f, _ := os.Open("testdata/net/tcp6")
	NetTable(f, "tcp6", got)
	f.Close()
	b, _ := os.ReadFile("testdata/net/forged.unix")
	NetTable(bytes.NewReader(b), "unix", got)
	if got[110193] != ambiguous {
		t.Errorf("forged inode named %q", got[110193])
	}
	if w := "unix seqpacket /run/with  two spaces"; got[110300] != w {
		t.Errorf("%q, want %q", got[110300], w)
	}
	// A line past the bound is skipped, the next one read.
	long := "h\n" + strings.Repeat("x", maxNetLine+10) + "\n0: 0100007F:0050 00000000:0000 0A 0 0 0 0 0 77\n"
	got = map[uint64]string{77: ""}
	NetTable(strings.NewReader(long), "tcp", got)
	if got[77] != "tcp 127.0.0.1:80 (listening)" {
		t.Errorf("after a long line: %q", got[77])
	}
}

// testdata/net/epoll.fdinfo is /proc/PID/fdinfo/N of waits.c's epoll
// instance, which watches descriptors 3, 4, 8 and 12.
func TestEpollTargets(t *testing.T) {
	b, err := os.ReadFile("testdata/net/epoll.fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	fds, n := EpollTargets(b, 8)
	seen := map[int]bool{}
	for _, fd := range fds {
		seen[fd] = true
	}
	if n != 4 || len(fds) != 4 || !seen[3] || !seen[4] || !seen[8] || !seen[12] {
		t.Errorf("watched %v of %d, want 3, 4, 8, 12", fds, n)
	}
	if fds, n := EpollTargets(b, 2); len(fds) != 2 || n != 4 {
		t.Errorf("bounded to 2: %v of %d", fds, n)
	}
	if ino := FDInode(b); ino == 0 {
		t.Errorf("no inode read from %q", b)
	}
}

func TestFDKind(t *testing.T) {
	for link, want := range map[string]string{
		"socket:[12]": "socket 12", "pipe:[8812]": "pipe 8812", "anon_inode:[eventfd]": "eventfd 0",
		"anon_inode:[eventpoll]": "epoll 0", "anon_inode:[timerfd]": "timerfd 0", "anon_inode:[signalfd]": "signalfd 0",
		"anon_inode:inotify": "inotify 0", "anon_inode:[io_uring]": "anon 0", "/var/log/x.log": "file 0",
		"/memfd:jit (deleted)": "file 0", "net:[4026531840]": "anon 0", "socket:[x]": "socket 0",
	} {
		k, ino := FDKind(link)
		if got := k + " " + strconv.FormatUint(ino, 10); got != want {
			t.Errorf("%q: %s, want %s", link, got, want)
		}
	}
}

func FuzzNetTable(f *testing.F) {
	files, _ := filepath.Glob("testdata/net/*")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b, strings.HasSuffix(file, "unix"))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, unix bool) {
		proto := "tcp6"
		if unix {
			proto = "unix"
		}
		want := map[uint64]string{1: "", 110193: "", 110199: ""}
		if err := NetTable(bytes.NewReader(data), proto, want); err != nil {
			t.Fatalf("error from a reader that cannot fail: %v", err)
		}
		if len(want) != 3 {
			t.Fatalf("named inodes not asked for: %v", want)
		}
		for _, name := range want {
			if len(name) > maxNetLine {
				t.Fatalf("a name longer than a line: %d bytes", len(name))
			}
		}
		EpollTargets(data, 8)
		FDInode(data)
	})
}
