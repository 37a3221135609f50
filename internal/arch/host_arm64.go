package arch

// The architecture stackshot runs on, for what it reads of live threads
// (PTRACE_GETREGSET's NT_PRSTATUS is the host's user register set).
const (
	Host          = ARM64
	HostRegsCount = ARM64UserRegsCount
	HostSP        = ARM64UserSP
	HostPC        = ARM64UserPC
)
