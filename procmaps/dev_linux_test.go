//go:build linux

package procmaps

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Mapping.Dev encodes as the kernel and glibc do (unix.Mkdev on Linux).
func TestMappingDev(t *testing.T) {
	for _, c := range [][2]uint32{{0, 0}, {8, 1}, {259, 3}, {0xfff, 0xff}, {0x12345, 0xabcdef}, {0xffffffff, 0xffffffff}} {
		m := Mapping{DevMajor: c[0], DevMinor: c[1]}
		if got, want := m.Dev(), unix.Mkdev(c[0], c[1]); got != want {
			t.Errorf("Dev(%#x, %#x) = %#x, want %#x", c[0], c[1], got, want)
		}
	}
}
