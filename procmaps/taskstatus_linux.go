//go:build linux

package procmaps

// ReadTaskStatus reads /proc/PID/task/TID/status (one thread's context
// switches, state).
func ReadTaskStatus(pid, tid int) (Status, error) {
	var st Status
	err := readSmall(taskPath(pid, tid, "status"), func(b []byte) { st = ParseStatus(b) })
	return st, err
}
