//go:build linux && !amd64

package sandbox

// deniedSyscalls is empty off x86-64: archGuard refuses every call of
// another architecture, so the child does not run there.
var deniedSyscalls []uint32
