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
		if l.child, l.err = spawn(cfg, t); l.err == nil {
			l.child.sendSetup()
		}
	}()
	return l
}

// Early waits until the child Launch started has its setup, and returns
// it before it is ready: requests made of it wait in the socket while it
// starts, and its first answer read is its setup's (Child.Started). nil:
// it could not be started (Child says why).
func (l *Launching) Early() *Child {
	<-l.done
	return l.child
}

// Child waits for the child Launch started to be ready and returns it, or
// says through say, as TryStart does, why the parsing of what stays
// in-process, and returns nil.
func (l *Launching) Child(what string, say func(string)) *Child {
	<-l.done
	err := l.err
	if err == nil {
		err = l.child.Started()
	}
	if err != nil {
		say(fmt.Sprintf("%s is parsed inside stackshot itself (%v; --no-sandbox says this is intended)", what, err))
		return nil
	}
	return l.child
}
