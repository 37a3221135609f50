//go:build linux

package sandbox

import (
	"os"
	"time"
)

// TestHook, set by tests only (and by stackshot built with the
// stackshot_testhooks tag, from STACKSHOT_TEST_SANDBOX_HOOK), makes the
// child misbehave on purpose when asked to resolve or to name addresses:
//
//	"crash"  the child panics (uncontained) when asked to resolve
//	"hang"   the child sleeps when asked to resolve (until killed)
//	"oom"    the child allocates past its memory limit when asked to resolve
//	"open"   nothing; Child.Probe reports what an open() gets in the child
var TestHook string

func hookBeforeResolve(hook string) {
	switch hook {
	case "crash":
		done := make(chan struct{})
		go func() {
			defer close(done)
			panic("test hook: the sandboxed child crashes")
		}()
		<-done
	case "hang":
		time.Sleep(time.Hour)
	case "oom":
		var keep [][]byte
		for {
			keep = append(keep, make([]byte, 64<<20)) // address space, untouched
		}
	}
}

// runHook answers a probe from the parent: what opening a file gets here.
func runHook(hook string) string {
	switch hook {
	case "open":
		f, err := os.Open("/etc/hostname")
		if err != nil {
			return err.Error()
		}
		f.Close()
		return "opened"
	}
	return ""
}
