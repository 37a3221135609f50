package output

import "fmt"

// linuxSignals names Linux's signals by number (signal(7), x86-64 and
// arm64 alike); a saved process is read on any OS, so not from the host's
// tables.
var linuxSignals = [...]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
	7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
	14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP",
	21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ", 26: "SIGVTALRM", 27: "SIGPROF",
	28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS"}

// signalName is "SIGABRT" for 6; "" for 0; "SIG37" for one unnamed.
func signalName(sig int) string {
	switch {
	case sig <= 0:
		return ""
	case sig < len(linuxSignals):
		return linuxSignals[sig]
	}
	return fmt.Sprintf("SIG%d", sig)
}
