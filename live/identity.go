//go:build linux

package live

import (
	"errors"
	"fmt"

	"stackshot/procmaps"
)

// afterCaptureHook, when set (by the test build only), runs between a
// process's capture and its resolution: a test replaces the process there.
var afterCaptureHook func(pid int)

// beforeSnapshotHook, when set (by the test build only), runs before
// snapshot n (counted from 1) of a --count series reads pid: a test
// replaces the process between two snapshots there.
var beforeSnapshotHook func(pid, n int)

// replacedError is a PID that names another process than the one read
// before: the first exited and the PID was given to a new one.
type replacedError struct {
	pid   int
	ticks int64 // how much later the new process started (clock ticks)
}

func (e *replacedError) Error() string {
	return fmt.Sprintf("process %d was replaced during the dump (it exited and its pid was given to a new process, started %d ticks later); nothing of either is shown; run the dump again",
		e.pid, e.ticks)
}

// sameProcess checks that the PID of before (read earlier; PID 0: not
// known, nothing to check) still names that process. A process that exited
// meanwhile was read while it lived; one whose PID now belongs to another
// process may have had its maps, its threads or its memory read from
// either: a *replacedError.
func sameProcess(before procmaps.Identity) error {
	if before.PID == 0 {
		return nil
	}
	now, err := procmaps.ReadIdentity(before.PID)
	if err != nil {
		return nil // gone (or unreadable now): what was read was of it
	}
	if now.StartTime != before.StartTime {
		return &replacedError{pid: before.PID, ticks: int64(now.StartTime) - int64(before.StartTime)}
	}
	return nil
}

// replaced reports whether err is a PID found naming another process.
func replaced(err error) bool {
	var r *replacedError
	return errors.As(err, &r)
}

// seriesEnded says that a --count series ends at snapshot n (from 1) of
// count because its PID names another process than the one the series
// began with (err, a *replacedError); kept snapshots were taken before.
func seriesEnded(err error, n, count, kept int) string {
	var r *replacedError
	errors.As(err, &r)
	before := fmt.Sprintf("the %d snapshots before", kept)
	if kept == 1 {
		before = "the snapshot before"
	}
	return fmt.Sprintf("process %d is not the process of the first snapshot at snapshot %d of %d (it exited and its pid was given to a new process, started %d ticks later); its report is of %s, nothing of the new process is shown; run the dump again to read the new one",
		r.pid, n, count, r.ticks, before)
}

// decideAgain forgets that pid's bytes were to be parsed in-process, so
// that its next capture decides again (sandbox.Needed) for the process
// the pid names then; a child once started stays.
func (s *Session) decideAgain(pid int) {
	if child, ok := s.boxes[pid]; ok && child == nil {
		delete(s.boxes, pid)
	}
}
