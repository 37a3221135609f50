//go:build !amd64 && !arm64

package arch

// Live targets are read on amd64 and arm64 only; elsewhere the offline
// parts build with the amd64 layout named as the host's.
const (
	Host          = AMD64
	HostRegsCount = UserRegsCount
	HostSP        = UserRSP
	HostPC        = UserRIP
)
