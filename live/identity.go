//go:build linux

package live

import (
	"fmt"

	"stackshot/procmaps"
)

// afterCaptureHook, when set (by the test build only), runs between a
// process's capture and its resolution: a test replaces the process there.
var afterCaptureHook func(pid int)

// sameProcess checks, once a process has been captured and resolved, that
// its PID still names the process whose identity was read before the
// capture began. A process that exited meanwhile was read while it lived;
// one whose PID now belongs to another process may have had its maps, its
// threads or its memory read from either, so none of it is shown.
func sameProcess(before procmaps.Identity) error {
	now, err := procmaps.ReadIdentity(before.PID)
	if err != nil {
		return nil // gone (or unreadable now): what was read was of it
	}
	if now.StartTime != before.StartTime {
		return fmt.Errorf("process %d was replaced during the dump (it exited and its pid was given to a new process, started %d ticks later); nothing of either is shown; run the dump again",
			before.PID, int64(now.StartTime)-int64(before.StartTime))
	}
	return nil
}
