//go:build linux

package sandbox

import "testing"

// BenchmarkChildUser is the choice of the child's uid: every process's
// ids read from /proc, a free one drawn.
func BenchmarkChildUser(b *testing.B) {
	for b.Loop() {
		if _, _, err := childUser(Target{UID: -1, GID: -1}); err != nil {
			b.Fatal(err)
		}
	}
}
