//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"stackshot/internal/testutil"
)

// gdbPrint runs gdb attached to pid and returns the value of the last
// "$N = VALUE" it printed.
func gdbPrint(t *testing.T, gdb string, pid int, cmds ...string) string {
	t.Helper()
	args := []string{"-q", "-batch", "-nx", "-p", strconv.Itoa(pid)}
	for _, c := range cmds {
		args = append(args, "-ex", c)
	}
	out, err := exec.Command(gdb, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb %v: %v\n%s", cmds, err, out)
	}
	m := regexp.MustCompile(`(?m)^\$\d+ = (?:\([^)]*\) )?(\S+)`).FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 {
		t.Fatalf("gdb %v printed no value:\n%s", cmds, out)
	}
	return m[len(m)-1][1]
}

// Real software: Debian's python3 and glibc's dynamic loader. gdb makes
// the interpreter's main thread take ld.so's recursive pthread mutex
// (_rtld_global._dl_load_lock, as a thread inside dlopen would); another
// thread's import then blocks in pthread_mutex_lock inside dlopen. The
// owner stackshot names must be the one gdb reads from the mutex
// (__data.__owner), and that is the main thread.
func TestRealDlopenLockOwnerAgreesWithGdb(t *testing.T) {
	gdb := testutil.Need(t, "gdb")
	testutil.Need(t, "python3")
	tg := testutil.Start(t, "python3", realSrc("dlwait.py"))
	v := readyVals(t, tg.Ready)
	main, importer := tidOf(t, v, "main"), tidOf(t, v, "importer")
	if main != tg.PID {
		t.Fatalf("main thread %d is not the process %d", main, tg.PID)
	}
	addr := gdbPrint(t, gdb, tg.PID, "thread 1", "call (int)pthread_mutex_lock(&_rtld_global._dl_load_lock)",
		"p/x &_rtld_global._dl_load_lock")
	lock, err := strconv.ParseUint(strings.TrimPrefix(addr, "0x"), 16, 64)
	if err != nil {
		t.Fatalf("gdb gave address %q", addr)
	}
	if got := tg.Ask("go"); got != "going" {
		t.Fatalf("target said %q to go", got)
	}
	// The importer is where the test wants it once it waits in futex(2)
	// on the loader's lock word.
	want := fmt.Sprintf("202 %#x ", lock)
	path := fmt.Sprintf("/proc/%d/task/%d/syscall", tg.PID, importer)
	for end := time.Now().Add(10 * time.Second); ; {
		b, _ := os.ReadFile(path)
		if strings.HasPrefix(string(b), want) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("importer never blocked on %#x: %s", lock, b)
		}
		time.Sleep(time.Millisecond)
	}
	p := diagJSON(t, strconv.Itoa(tg.PID))
	wantWait(t, p, importer, "mutex", fmt.Sprintf("%#x", lock), main)
	owner := gdbPrint(t, gdb, tg.PID, fmt.Sprintf("p ((pthread_mutex_t*)%#x)->__data.__owner", lock))
	if owner != strconv.Itoa(main) {
		t.Errorf("gdb says the owner is %s, stackshot %d", owner, main)
	}
	wantDeadlocks(t, p, "")
}
