package ptrace

import (
	"encoding/json"
	"strings"

	"stackshot/internal/arch"
)

// Outcome says why a thread was captured the way it was (read without a
// stop, stopped, or given up on), as a value callers switch on; Thread.Err
// keeps the human-readable sentence. The zero value is a capture that went
// as its Method says.
type Outcome uint8

const (
	OutcomeCaptured          Outcome = iota // captured as Method says
	OutcomeKernelThread                     // a kernel thread: its kernel stack only
	OutcomeExited                           // the thread has exited (zombie)
	OutcomeTraced                           // another tracer holds the process: /proc only
	OutcomeRunning                          // running, and the mode forbids a stop: /proc only
	OutcomeNotStopped                       // did not reach its stop within the wait: /proc only
	OutcomeNotPermitted                     // ptrace refused (EPERM): /proc only
	OutcomeSeizeFailed                      // PTRACE_SEIZE failed for another reason
	OutcomeInterruptFailed                  // PTRACE_INTERRUPT failed (the thread was detached)
	OutcomeWaitFailed                       // the stop's wait status made no sense
	OutcomeRegsFailed                       // stopped, but its registers could not be read
	OutcomeTracerUnavailable                // no tracer thread could take the job
	OutcomeDeadline                         // not reached before the capture's deadline ran out
	OutcomeStopFallback                     // would not stop; kept its consistent no-stop copy
	OutcomeStopSpared                       // not stopped: a stop would interrupt its system call (EINTR)
	OutcomeUnknown                          // an old capture's error text names no known outcome
)

var outcomeNames = [...]string{
	OutcomeCaptured:          "captured",
	OutcomeKernelThread:      "kernel-thread",
	OutcomeExited:            "exited",
	OutcomeTraced:            "traced",
	OutcomeRunning:           "running",
	OutcomeNotStopped:        "not-stopped",
	OutcomeNotPermitted:      "not-permitted",
	OutcomeSeizeFailed:       "seize-failed",
	OutcomeInterruptFailed:   "interrupt-failed",
	OutcomeWaitFailed:        "wait-failed",
	OutcomeRegsFailed:        "regs-failed",
	OutcomeTracerUnavailable: "tracer-unavailable",
	OutcomeDeadline:          "deadline",
	OutcomeStopFallback:      "stop-fallback",
	OutcomeStopSpared:        "stop-spared",
	OutcomeUnknown:           "unknown",
}

func (o Outcome) String() string { return nameOf(outcomeNames[:], o, "unknown") }

// MarshalText writes the outcome's name (the capture file's form).
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText reads an outcome's name; a name from a newer stackshot
// reads as OutcomeUnknown.
func (o *Outcome) UnmarshalText(b []byte) error {
	*o = parseName(outcomeNames[:], string(b), OutcomeUnknown)
	return nil
}

// nameOf and parseName map an enum to and from its names.
func nameOf[T ~uint8](names []string, v T, fallback string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fallback
}

func parseName[T ~uint8](names []string, s string, fallback T) T {
	for i, n := range names {
		if n == s {
			return T(i)
		}
	}
	return fallback
}

// KernelOutcome says how reading a thread's kernel stack went.
type KernelOutcome uint8

const (
	KernelRead       KernelOutcome = iota // read, or not asked for
	KernelDenied                          // /proc refused it (root or CAP_SYS_ADMIN needed)
	KernelUnreadable                      // any other failure
)

var kernelOutcomeNames = [...]string{"read", "denied", "unreadable"}

func (k KernelOutcome) String() string { return nameOf(kernelOutcomeNames[:], k, "unreadable") }

// MarshalText writes the outcome's name.
func (k KernelOutcome) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads an outcome's name (unknown names: KernelUnreadable).
func (k *KernelOutcome) UnmarshalText(b []byte) error {
	*k = parseName(kernelOutcomeNames[:], string(b), KernelUnreadable)
	return nil
}

// PC is where the thread is, as far as the capture knows: the instruction
// pointer of its registers, else the PC of the system call it blocks in (a
// thread read without a stop), else 0.
func (th *Thread) PC() uint64 {
	switch {
	case len(th.Regs) == arch.ARM64UserRegsCount:
		return th.Regs[arch.ARM64UserPC]
	case len(th.Regs) > arch.UserRIP:
		return th.Regs[arch.UserRIP]
	case th.Syscall != nil:
		return th.Syscall.PC
	}
	return 0
}

// UnmarshalJSON reads a thread, giving a capture saved before outcomes
// were values the outcome its error texts describe.
func (th *Thread) UnmarshalJSON(b []byte) error {
	type plain Thread
	if err := json.Unmarshal(b, (*plain)(th)); err != nil {
		return err
	}
	if th.Outcome == OutcomeCaptured && th.Err != "" {
		th.Outcome = legacyOutcome(th.Err)
	}
	if th.KernelOutcome == KernelRead && th.KernelErr != "" {
		th.KernelOutcome = KernelUnreadable
		if strings.Contains(th.KernelErr, "permission denied") {
			th.KernelOutcome = KernelDenied
		}
	}
	return nil
}

// legacyOutcome maps the error sentences older captures carry.
func legacyOutcome(msg string) Outcome {
	for _, l := range [...]struct {
		prefix string
		o      Outcome
	}{
		{"kernel thread", OutcomeKernelThread},
		{"thread has exited", OutcomeExited},
		{"traced by pid", OutcomeTraced},
		{"running; not stopped", OutcomeRunning},
		{"thread did not stop", OutcomeNotStopped},
		{"ptrace not permitted", OutcomeNotPermitted},
		{"tracer unavailable", OutcomeTracerUnavailable},
		{"not captured before", OutcomeDeadline},
		{"would not stop", OutcomeStopFallback},
	} {
		if strings.HasPrefix(msg, l.prefix) {
			return l.o
		}
	}
	return OutcomeUnknown
}

// spareStop reports whether the no-stop copy of a thread blocked in a
// system call that a ptrace stop would make fail with EINTR (see
// arch.StopInterrupts) is kept as it is, though the check found its walk
// incomplete (or could not tell): a stop is the one disturbance stackshot
// allows itself, and that call's error would be another. It marks the
// thread so (SpareReason).
func (th *Thread) spareStop() bool {
	sc := th.Syscall
	if th.Method != MethodNoStop || sc == nil || !sc.InCall || !arch.StopInterrupts(sc.Nr) {
		return false
	}
	th.Outcome = OutcomeStopSpared
	return true
}

// SpareReason says why a thread whose stack is incomplete was not stopped
// to complete it ("" when it was not spared a stop).
func (th *Thread) SpareReason() string {
	if th.Outcome != OutcomeStopSpared || th.Syscall == nil {
		return ""
	}
	return "not stopped: a stop would make its " + arch.SyscallNameFor(arch.Host, th.Syscall.Nr) + " fail with EINTR (--mode stop stops it)"
}

// giveUp marks a thread shown from /proc only, for reason o.
func (th *Thread) giveUp(o Outcome, msg string) {
	th.Method, th.Outcome, th.Err = MethodProcOnly, o, msg
}
