package testutil

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Split is a C target built with -g and split as distributions ship it:
// the stripped binary (Exe, keeping its build id and, with symtab, its
// .symtab) and the separate debug file (Debug, objcopy --only-keep-debug),
// without a .gnu_debuglink, so that only a build-id lookup finds it.
type Split struct {
	Exe, Debug string
	BuildID    string // from readelf -n of Exe
}

// SplitTarget builds testdata/targets/NAME.c that way. symtab keeps the
// symbol table in the binary (strip --strip-debug) instead of stripping it
// all (--strip-all).
func SplitTarget(t testing.TB, name string, symtab bool) Split {
	t.Helper()
	Need(t, "gcc")
	Need(t, "objcopy")
	strip := "--strip-all"
	if symtab {
		strip = "--strip-debug"
	}
	src := Testdata("targets")
	exe := Artifact(t, name+"-split"+strip, src,
		[]string{"gcc", "-O0", "-g", "-fno-omit-frame-pointer", "-pthread", "-Wl,--build-id", "$SRC/" + name + ".c", "-o", "$DIR/full"},
		[]string{"objcopy", "--only-keep-debug", "$DIR/full", "$DIR/" + name + ".debug"},
		[]string{"objcopy", strip, "$DIR/full", "$OUT"},
		[]string{"rm", "$DIR/full"})
	out, err := exec.Command("readelf", "-n", exe).Output()
	if err != nil {
		t.Fatalf("readelf -n %s: %v", exe, err)
	}
	m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("readelf -n %s shows no build id:\n%s", exe, out)
	}
	return Split{Exe: exe, Debug: filepath.Join(filepath.Dir(exe), name+".debug"), BuildID: string(m[1])}
}

// Debuginfod is a running elfutils debuginfod server.
type Debuginfod struct {
	URL string // http://127.0.0.1:PORT
	cmd *exec.Cmd
}

// StartDebuginfod starts the real elfutils server (debuginfod -F) over the
// files given, copied into a directory of its own, and waits until it
// serves each of ready (URL paths such as "/buildid/ID/debuginfo"): its
// scan runs in the background. It is stopped, by pid, when the test ends.
// (debuginfod 0.188 cannot be told an address to listen on: it listens on
// every interface, serving only these test files, for the test's length;
// the tests talk to it on 127.0.0.1.)
func StartDebuginfod(t testing.TB, files []string, ready ...string) *Debuginfod {
	t.Helper()
	bin := Need(t, "debuginfod")
	dir := t.TempDir()
	serve := filepath.Join(dir, "serve")
	if err := os.Mkdir(serve, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(serve, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		port := freePort(t)
		cmd := exec.Command(bin, "-F", "-p", fmt.Sprint(port), "-d", filepath.Join(dir, fmt.Sprintf("db%d.sqlite", attempt)),
			"-t", "0", "-g", "0", "-c", "1", serve)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting debuginfod: %v", err)
		}
		d := &Debuginfod{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		if d.waitReady(exited, ready) {
			t.Cleanup(stop)
			return d
		}
		stop()
	}
	t.Fatalf("debuginfod did not serve %v within 30s (five ports tried)", ready)
	return nil
}

// waitReady polls until every path of ready is served (200), the server
// exits (its port was taken), or 30 s pass.
func (d *Debuginfod) waitReady(exited <-chan struct{}, ready []string) bool {
	end := time.Now().Add(30 * time.Second)
	cl := &http.Client{Timeout: 5 * time.Second}
	for time.Now().Before(end) {
		select {
		case <-exited:
			return false
		default:
		}
		all := true
		for _, p := range ready {
			resp, err := cl.Get(d.URL + p)
			if err != nil {
				all = false
				break
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				all = false
				break
			}
		}
		if all {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// freePort returns a TCP port free on the loopback interface just now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// DeadURL is an http URL on the loopback interface where nothing listens
// (a server that is down: connections are refused).
func DeadURL(t testing.TB) string {
	return fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
}

// CacheFiles lists the files under a debuginfod cache directory, relative
// to it, with their modes: "ID/debuginfo 0400".
func CacheFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, fmt.Sprintf("%s %04o", rel, fi.Mode().Perm()))
		return nil
	})
	return out
}

// HasTemp reports whether any file under dir looks like an unfinished
// download (a hidden temporary name).
func HasTemp(dir string) bool {
	found := false
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(fi.Name(), ".") && p != dir {
			found = true
		}
		return nil
	})
	return found
}
