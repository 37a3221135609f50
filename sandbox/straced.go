//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// straceDir, set by stackshot built with the stackshot_testhooks tag only
// (STACKSHOT_TEST_STRACE_DIR), has every child traced by strace from its
// start, the trace written there (child.PID): how the system calls its
// filter allows were found (filter.go, scripts/child-syscalls.sh).
var straceDir string

// straceChild has strace attach to every thread of child pid, and waits
// until it has (the child reads its setup, then locks itself down: all of
// that is traced).
func straceChild(pid int) {
	cmd := exec.Command("strace", "-f", "-qq", "-n", "-o", filepath.Join(straceDir, fmt.Sprintf("child.%d", pid)), "-p", fmt.Sprint(pid))
	if err := cmd.Start(); err != nil {
		return
	}
	go cmd.Wait()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return
		}
		traced := 0
		for _, e := range ents {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, e.Name()))
			if i := bytes.Index(b, []byte("TracerPid:\t")); i >= 0 && !bytes.HasPrefix(b[i+len("TracerPid:\t"):], []byte("0\n")) {
				traced++
			}
		}
		if traced == len(ents) {
			return
		}
	}
}
