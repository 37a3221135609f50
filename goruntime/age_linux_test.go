//go:build linux

package goruntime_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// TestDebianAge reads the goroutines of Debian's age (Go 1.19, PIE,
// cgo, externally linked, stripped, its pclntab inside .data.rel.ro)
// while it encrypts from a pipe that stays open: the main goroutine,
// blocked in read, walks from main.main's callees down to runtime.goexit,
// named by the program's own pclntab.
func TestDebianAge(t *testing.T) {
	age := testutil.Need(t, "age")
	keygen := testutil.Need(t, "age-keygen")
	key := filepath.Join(t.TempDir(), "key.txt")
	if out, err := exec.Command(keygen, "-o", key).CombinedOutput(); err != nil {
		t.Fatalf("age-keygen: %v\n%s", err, out)
	}
	kb, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	recipient := regexp.MustCompile(`age1[0-9a-z]+`).FindString(string(kb))
	cmd := exec.Command(age, "-r", recipient)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		stdin.Close()
		cmd.Wait()
	})
	// Past its start (the runtime set up): one of its threads blocks in
	// read, the main goroutine waiting for input.
	pid := cmd.Process.Pid
	reading := func() bool {
		for tid := range testutil.ThreadStates(pid) {
			if testutil.WaitInSyscallNr(pid, tid, 0, 0) {
				return true
			}
		}
		return false
	}
	for end := time.Now().Add(10 * time.Second); !reading(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("age did not block reading its input")
		}
	}
	bin, err := filepath.EvalSymlinks(age)
	if err != nil {
		t.Fatal(err)
	}
	// Its main goroutine blocks in read once it waits for input.
	var chain string
	for try := 0; try < 50; try++ {
		rt := openTarget(t, cmd.Process.Pid, bin)
		snap, err := rt.Goroutines()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range snap.Goroutines {
			if g.ID == 1 {
				chain = strings.Join(g.Funcs, " < ")
			}
		}
		if strings.Contains(chain, "main.main < runtime.main < runtime.goexit") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("age's main goroutine: %q", chain)
}
