//go:build linux

package term

import "golang.org/x/sys/unix"

// IsTerminal reports whether the file descriptor fd is a terminal.
func IsTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}
