//go:build linux

package sandbox

import "fmt"

// TryStart starts a child for target t, or says through say, in one line,
// why the parsing of what (e.g. "process 42") stays in-process, and
// returns nil.
func TryStart(cfg Config, t Target, what string, say func(string)) *Child {
	child, err := Start(cfg, t)
	if err != nil {
		say(fmt.Sprintf("%s is parsed inside stackshot itself (%v; --no-sandbox says this is intended)", what, err))
		return nil
	}
	return child
}

// Launching is a child being started in the background (Launch): its
// exec and lockdown overlap the caller's work (a capture's /proc reads)
// until the child is first needed.
type Launching struct {
	done  chan struct{}
	child *Child
	err   error
}

// Launch starts a child for target t without waiting for it: Child
// waits. Its process starts in the background, not before Launch
// returns: the caller's capture has then usually read which CPUs the
// target's running threads are on, and the child starts kept off them
// (ptrace.Companion). Started first, its Go runtime's start put its
// threads beside a spinning target's: 30 sandboxed dumps froze a spinning
// thread for over 250 µs 28 to 44 times, against 3 to 14 started so.
func Launch(cfg Config, t Target) *Launching {
	l := &Launching{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.child, l.err = Start(cfg, t)
	}()
	return l
}

// Child waits for the child Launch started and returns it, or says
// through say, as TryStart does, why the parsing of what stays
// in-process, and returns nil.
func (l *Launching) Child(what string, say func(string)) *Child {
	<-l.done
	if l.err != nil {
		say(fmt.Sprintf("%s is parsed inside stackshot itself (%v; --no-sandbox says this is intended)", what, l.err))
		return nil
	}
	return l.child
}
