//go:build !linux

package offline

import (
	"os"

	"stackshot/report"
)

// SandboxConfig is empty where there is no sandbox: saved files are read
// in-process (report on another OS than the one captured).
type SandboxConfig struct{}

func (r *Reader) readSandboxed(*os.File, int64, string) ([]*report.Process, int, error, bool) {
	return nil, 0, nil, false
}
